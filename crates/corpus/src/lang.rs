//! Language identification: the archive's own label when it has one (Common Crawl's WET
//! headers), whatlang otherwise.

/// ISO 639-3 code and confidence (0 to 1).
pub fn detect(text: &str) -> Option<(String, f64)> {
    // A long document says the same thing in its first pages; whatlang's cost grows with
    // the input.
    let info = whatlang::detect(&text[..floor_boundary(text, 20_000)])?;
    Some((info.lang().code().to_string(), info.confidence()))
}

/// The text's script as an ISO 15924 code (`Latn`, `Cyrl`, `Hani`, ...), the key FineWeb 2
/// files its per-language settings under.
pub fn script(text: &str) -> Option<&'static str> {
    use whatlang::Script as S;
    let head = &text[..floor_boundary(text, 20_000)];
    Some(match whatlang::detect_script(head)? {
        S::Arabic => "Arab",
        S::Armenian => "Armn",
        S::Bengali => "Beng",
        S::Cyrillic => "Cyrl",
        S::Devanagari => "Deva",
        S::Ethiopic => "Ethi",
        S::Georgian => "Geor",
        S::Greek => "Grek",
        S::Gujarati => "Gujr",
        S::Gurmukhi => "Guru",
        S::Hangul => "Hang",
        S::Hebrew => "Hebr",
        S::Hiragana | S::Katakana => "Jpan",
        S::Kannada => "Knda",
        S::Khmer => "Khmr",
        S::Latin => "Latn",
        S::Malayalam => "Mlym",
        S::Mandarin => "Hani",
        S::Myanmar => "Mymr",
        S::Oriya => "Orya",
        S::Sinhala => "Sinh",
        S::Tamil => "Taml",
        S::Telugu => "Telu",
        S::Thai => "Thai",
    })
}

fn floor_boundary(text: &str, max: usize) -> usize {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The language of a document: the archive's label (first code of a list such as
/// `spa,eng`) with confidence 1, or whatlang's guess.
pub fn language(text: &str, archive_label: Option<&str>) -> Option<(String, f64)> {
    if let Some(label) = archive_label
        && let Some(first) = label.split(',').map(str::trim).find(|c| !c.is_empty())
    {
        return Some((first.to_string(), 1.0));
    }
    detect(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_guesses() {
        assert_eq!(language("x", Some("spa,eng")).unwrap(), ("spa".into(), 1.0));
        let (l, c) = detect(
            "The quick brown fox jumps over the lazy dog, and then it runs away into the forest.",
        )
        .unwrap();
        assert_eq!(l, "eng");
        assert!(c > 0.5);
        let (l, _) = detect(
            "El rápido zorro marrón salta sobre el perro perezoso y luego se escapa al bosque.",
        )
        .unwrap();
        assert_eq!(l, "spa");
    }
}
