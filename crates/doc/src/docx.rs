//! DOCX (Office Open XML): `word/document.xml` read as a stream of paragraphs, runs and
//! tables, headings and list items by their style, and `docProps/core.xml` for the title,
//! author and dates. The archive is read with caps on its entries and on what each may
//! inflate to: a zip bomb is an error, never memory.

use std::io::Read;

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::{DocError, DocText, Limits};

/// Entries an archive may list; a Word file has a few dozen.
const MAX_ENTRIES: usize = 10_000;

/// The body's inflated size, at most.
const MAX_PART_BYTES: u64 = 64 << 20;

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<DocText, DocError> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| DocError::Unreadable(format!("not a zip archive: {e}")))?;
    if zip.len() > MAX_ENTRIES {
        return Err(DocError::Unreadable(format!(
            "{} archive entries, more than {MAX_ENTRIES}",
            zip.len()
        )));
    }
    let body = part(&mut zip, "word/document.xml")?
        .ok_or_else(|| DocError::Unreadable("no word/document.xml: not a Word document".into()))?;
    let mut out = DocText::default();
    body_markdown(&body, limits, &mut out)?;
    if let Ok(Some(core)) = part(&mut zip, "docProps/core.xml") {
        core_props(&core, &mut out);
    }
    if out.title.is_none() {
        out.title = out.first_heading();
    }
    out.finish();
    Ok(out)
}

/// One part of the archive, inflated up to the cap (`None`: not there).
fn part(
    zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>,
    name: &str,
) -> Result<Option<Vec<u8>>, DocError> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(DocError::Unreadable(format!("{name}: {e}"))),
    };
    let mut out = Vec::new();
    file.take(MAX_PART_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| DocError::Unreadable(format!("{name}: {e}")))?;
    if out.len() as u64 > MAX_PART_BYTES {
        return Err(DocError::TooLarge(format!(
            "{name} inflates past {MAX_PART_BYTES} bytes"
        )));
    }
    Ok(Some(out))
}

/// What the paragraph being read is.
#[derive(Default)]
struct Para {
    text: String,
    heading: Option<usize>,
    list: bool,
}

fn local(name: &str) -> &str {
    match name.rfind(':') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

fn attr_val(e: &quick_xml::events::BytesStart<'_>, key: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| local(a.key.as_ref()) == key)
        .map(|a| a.value.into_owned())
}

/// `Heading2` / `heading 2` / `Title` as a heading level.
fn heading_level(style: &str) -> Option<usize> {
    let s = style.to_ascii_lowercase().replace(' ', "");
    if s == "title" {
        return Some(1);
    }
    s.strip_prefix("heading")
        .and_then(|n| n.parse::<usize>().ok())
        .map(|n| n.clamp(1, 6))
}

fn body_markdown(xml: &[u8], limits: &Limits, out: &mut DocText) -> Result<(), DocError> {
    let mut r = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut para: Option<Para> = None;
    let mut in_text = false;
    let mut row: Option<Vec<String>> = None;
    let mut cell: Option<String> = None;
    let mut table_rows = 0usize;
    loop {
        let ev = r
            .read_event_into(&mut buf)
            .map_err(|e| DocError::Unreadable(format!("word/document.xml: {e}")))?;
        match ev {
            Event::Start(e) | Event::Empty(e) => match local(e.name().as_ref()) {
                "p" => para = Some(Para::default()),
                "pStyle" => {
                    if let (Some(p), Some(v)) = (para.as_mut(), attr_val(&e, "val")) {
                        p.heading = heading_level(&v);
                    }
                }
                "numPr" => {
                    if let Some(p) = para.as_mut() {
                        p.list = true;
                    }
                }
                "t" => in_text = true,
                "tab" => push(&mut para, "\t"),
                "br" | "cr" => push(&mut para, "\n"),
                "tr" => row = Some(Vec::new()),
                "tc" => cell = Some(String::new()),
                _ => {}
            },
            Event::Text(t) if in_text => push(&mut para, &t.xml10_content()),
            Event::GeneralRef(g) if in_text => {
                let s = match g.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => match g.as_ref() {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        _ => String::new(),
                    },
                };
                push(&mut para, &s);
            }
            Event::End(e) => match local(e.name().as_ref()) {
                "t" => in_text = false,
                "p" => {
                    if let Some(p) = para.take() {
                        let text = p.text.trim();
                        if let Some(c) = cell.as_mut() {
                            if !c.is_empty() && !text.is_empty() {
                                c.push(' ');
                            }
                            c.push_str(text);
                        } else if !text.is_empty() {
                            let md = match (p.heading, p.list) {
                                (Some(n), _) => format!("{} {text}", "#".repeat(n)),
                                (None, true) => format!("- {text}"),
                                _ => text.to_string(),
                            };
                            out.push_block(&md, text, p.list && p.heading.is_none());
                        }
                    }
                }
                "tc" => {
                    if let (Some(c), Some(r)) = (cell.take(), row.as_mut()) {
                        r.push(c.replace('|', "\\|").replace('\n', " "));
                    }
                }
                "tr" => {
                    if let Some(cells) = row.take().filter(|c| !c.is_empty()) {
                        let line = format!("| {} |", cells.join(" | "));
                        let text = cells.join("\t");
                        out.push_row(&line, &text, table_rows == 0, cells.len());
                        table_rows += 1;
                    }
                }
                "tbl" => {
                    table_rows = 0;
                    out.end_table();
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
        if out.text.len() >= limits.max_chars {
            out.cut = true;
            break;
        }
    }
    Ok(())
}

fn push(para: &mut Option<Para>, s: &str) {
    if let Some(p) = para.as_mut() {
        p.text.push_str(s);
    }
}

/// `docProps/core.xml`: Dublin Core title, creator, dates and language.
fn core_props(xml: &[u8], out: &mut DocText) {
    let mut r = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut field: Option<&'static str> = None;
    loop {
        let Ok(ev) = r.read_event_into(&mut buf) else {
            return;
        };
        match ev {
            Event::Start(e) => {
                field = match local(e.name().as_ref()) {
                    "title" => Some("title"),
                    "creator" => Some("author"),
                    "created" => Some("created"),
                    "modified" => Some("modified"),
                    "language" => Some("language"),
                    _ => None,
                }
            }
            Event::Text(t) => {
                let Some(f) = field else { continue };
                let v = t.xml10_content().trim().to_string();
                if v.is_empty() {
                    continue;
                }
                let slot = match f {
                    "title" => &mut out.title,
                    "author" => &mut out.author,
                    "created" => &mut out.created,
                    "modified" => &mut out.modified,
                    _ => &mut out.language,
                };
                slot.get_or_insert(v);
            }
            Event::End(_) => field = None,
            Event::Eof => return,
            _ => {}
        }
        buf.clear();
    }
}
