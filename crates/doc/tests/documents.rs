//! Documents read end to end from bytes made the way real tools make them (the test site's
//! generators): text, Markdown and metadata of a PDF and a DOCX, a scanned page counted,
//! broken and hostile files an error, never a panic or a hang.

use trawl_core::mutate::each_mutation;
use trawl_doc::{DocError, DocKind, Limits, extract};
use trawl_testsite::docs;

#[test]
fn a_pdf_s_text_pages_and_metadata() {
    let bytes = docs::pdf(
        "A guide",
        &[
            &["First page", "The marmot digs."],
            &["The chinchilla bathes."],
        ],
        true,
    );
    let d = extract(bytes, DocKind::Pdf, Limits::default()).unwrap();
    assert_eq!(d.title.as_deref(), Some("A guide"));
    assert_eq!(d.author.as_deref(), Some("Ada Lovelace"));
    assert_eq!(d.created.as_deref(), Some("2024-03-15T09:30:00+01:00"));
    assert_eq!(d.modified.as_deref(), Some("2025-01-02"));
    assert_eq!((d.pages, d.scanned_pages), (3, 1), "{d:?}");
    assert!(d.text.contains("The marmot digs."), "{}", d.text);
    assert!(d.text.contains("The chinchilla bathes."), "{}", d.text);
    assert!(
        d.text.find("marmot") < d.text.find("chinchilla"),
        "pages in order"
    );
    assert!(!d.cut);
}

#[test]
fn a_scan_gets_no_title_from_its_margins() {
    let d = extract(docs::pdf("", &[], true), DocKind::Pdf, Limits::default()).unwrap();
    assert_eq!((d.pages, d.scanned_pages), (1, 1), "{d:?}");
    assert_eq!(d.title, None, "{d:?}");
}

#[test]
fn limits_cut_a_pdf_between_pages() {
    let bytes = docs::pdf("T", &[&["one"], &["two"], &["three"]], false);
    let limits = Limits {
        max_pages: 2,
        ..Limits::default()
    };
    let d = extract(bytes, DocKind::Pdf, limits).unwrap();
    assert_eq!(d.pages, 2);
    assert!(d.cut && !d.text.contains("three"), "{d:?}");
}

#[test]
fn a_docx_s_structure_and_properties() {
    let d = extract(docs::docx(), DocKind::Docx, Limits::default()).unwrap();
    assert_eq!(d.title.as_deref(), Some("Small cats"));
    assert_eq!(d.author.as_deref(), Some("Jane Goodall"));
    assert_eq!(d.language.as_deref(), Some("en-GB"));
    assert_eq!(d.created.as_deref(), Some("2023-05-01T10:00:00Z"));
    let md = &d.markdown;
    assert!(
        md.starts_with("# Field notes on small cats\n\n# The ocelot\n\n"),
        "{md}"
    );
    assert!(md.contains("rests by day"), "{md}");
    assert!(
        md.contains("hunts at night & rests"),
        "entities decoded: {md}"
    );
    assert!(
        md.contains("- The margay climbs down trees head first.\n- The caracal"),
        "{md}"
    );
    assert!(
        md.contains("| Cat | Weight |\n| --- | --- |\n| Ocelot | 12 kg |"),
        "{md}"
    );
    assert!(d.text.contains("Ocelot\t12 kg"), "{}", d.text);
    assert!(!d.text.contains('#'), "{}", d.text);
}

#[test]
fn broken_files_are_errors() {
    let r = extract(
        b"%PDF-1.7\n1 0 obj << /Type".to_vec(),
        DocKind::Pdf,
        Limits::default(),
    );
    assert!(matches!(r, Err(DocError::Unreadable(_))), "{r:?}");
    let r = extract(
        b"PK\x03\x04 not a zip".to_vec(),
        DocKind::Docx,
        Limits::default(),
    );
    assert!(matches!(r, Err(DocError::Unreadable(_))), "{r:?}");
}

/// A zip whose document part inflates past the cap is refused, not inflated.
#[test]
fn a_zip_bomb_is_refused() {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file("word/document.xml", o).unwrap();
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..80 {
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap();
    }
    let bytes = buf.into_inner();
    assert!(bytes.len() < 1 << 20, "compressed small: {}", bytes.len());
    let r = extract(bytes, DocKind::Docx, Limits::default());
    assert!(matches!(r, Err(DocError::TooLarge(_))), "{r:?}");
}

#[test]
fn hostile_documents_return() {
    let pdf = docs::pdf("T", &[&["Some words on a page."]], true);
    let docx = docs::docx();
    let limits = Limits {
        deadline: std::time::Duration::from_secs(5),
        ..Limits::default()
    };
    each_mutation(&[&pdf], 1000, |m| {
        let _ = extract(m.to_vec(), DocKind::Pdf, limits.clone());
    });
    each_mutation(&[&docx], 1000, |m| {
        let _ = extract(m.to_vec(), DocKind::Docx, limits.clone());
    });
    for kind in [DocKind::Text, DocKind::Markdown] {
        each_mutation(
            &[b"# Title\n\nSome *text* with [a](link).\n".as_slice()],
            400,
            |m| {
                let _ = extract(m.to_vec(), kind, limits.clone());
            },
        );
    }
}
