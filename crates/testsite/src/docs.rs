//! `/docs/`: documents that are not HTML, made here byte by byte so the tests need no
//! data files: a PDF with a text layer (Info title, author and dates; two pages), a PDF
//! whose only page is an image (a scan), a broken PDF, a DOCX (headings, a list, a table,
//! core properties), a plain-text file and a Markdown file.

use std::io::Write;

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Shared;

/// Words each document holds, one set per file, to look for in records and indexes.
pub const PDF_WORDS: [&str; 2] = ["marmot", "chinchilla"];
pub const DOCX_WORDS: [&str; 3] = ["ocelot", "margay", "caracal"];
pub const TEXT_WORD: &str = "jerboa";
pub const MARKDOWN_WORD: &str = "quoll";

/// A PDF of one page per entry of `pages` (each a list of lines in Helvetica), with an
/// Info dictionary; `image_page` adds a last page that is a 1x1 image and no text.
pub fn pdf(title: &str, pages: &[&[&str]], image_page: bool) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    // 1 catalog, 2 pages, 3 font, 4 info; then page + content pairs; then the image.
    let n = pages.len() + usize::from(image_page);
    let first_page = 5;
    let kids: Vec<String> = (0..n)
        .map(|i| format!("{} 0 R", first_page + 2 * i))
        .collect();
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());
    objects.push(format!(
        "<< /Title ({title}) /Author (Ada Lovelace) /CreationDate (D:20240315093000+01'00') /ModDate (D:20250102) >>"
    ));
    let image_obj = first_page + 2 * n;
    for (i, lines) in pages.iter().enumerate() {
        let mut content = String::from("BT /F1 12 Tf 72 720 Td 16 TL\n");
        for l in lines.iter() {
            let esc = l
                .replace('\\', "\\\\")
                .replace('(', "\\(")
                .replace(')', "\\)");
            content.push_str(&format!("({esc}) Tj T*\n"));
        }
        content.push_str("ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            first_page + 2 * i + 1
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    if image_page {
        let content = "q 500 0 0 700 50 50 cm /Im1 Do Q";
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 {image_obj} 0 R >> >> /Contents {} 0 R >>",
            image_obj - 1
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
        objects.push(
            "<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 1 >>\nstream\n\u{80}\nendstream"
                .into(),
        );
    }
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// A Word document: a title, a heading, paragraphs, a list, a table, core properties.
pub fn docx() -> Vec<u8> {
    let w = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;
    let p = |style: Option<&str>, list: bool, text: &str| {
        let mut ppr = String::new();
        if let Some(s) = style {
            ppr.push_str(&format!(r#"<w:pStyle w:val="{s}"/>"#));
        }
        if list {
            ppr.push_str(r#"<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>"#);
        }
        format!(
            "<w:p><w:pPr>{ppr}</w:pPr><w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>"
        )
    };
    let cell = |t: &str| format!("<w:tc>{}</w:tc>", p(None, false, t));
    let body = [
        p(Some("Title"), false, "Field notes on small cats"),
        p(Some("Heading1"), false, "The ocelot"),
        p(
            None,
            false,
            "The ocelot hunts at night &amp; rests by day in dense cover.",
        ),
        p(None, true, "The margay climbs down trees head first."),
        p(None, true, "The caracal leaps to catch birds in flight."),
        format!(
            "<w:tbl><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>",
            cell("Cat"),
            cell("Weight"),
            cell("Ocelot"),
            cell("12 kg")
        ),
    ]
    .concat();
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {w}><w:body>{body}</w:body></w:document>"#
    );
    let core = r#"<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/"><dc:title>Small cats</dc:title><dc:creator>Jane Goodall</dc:creator><dcterms:created>2023-05-01T10:00:00Z</dcterms:created><dc:language>en-GB</dc:language></cp:coreProperties>"#;
    let types = r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in [
            ("[Content_Types].xml", types),
            ("word/document.xml", document.as_str()),
            ("docProps/core.xml", core),
        ] {
            // Writing to memory cannot fail but for a bug here: a test site may panic.
            z.start_file(name, opts).expect("zip entry");
            z.write_all(data.as_bytes()).expect("zip write");
        }
        z.finish().expect("zip finish");
    }
    buf.into_inner()
}

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/docs/", get(index))
        .route("/docs/{name}", get(doc))
}

async fn index() -> Response {
    let links: String = [
        "guide.pdf",
        "scan.pdf",
        "broken.pdf",
        "report.docx",
        "notes.txt",
        "README.md",
    ]
    .iter()
    .map(|n| format!("<li><a href=\"/docs/{n}\">{n}</a></li>"))
    .collect();
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        format!(
            "<!doctype html><html><head><title>Documents</title></head><body><main>\
             <h1>Documents</h1><p>Files this site offers for download.</p><ul>{links}</ul>\
             </main></body></html>"
        ),
    )
        .into_response()
}

async fn doc(Path(name): Path<String>) -> Response {
    let (ty, body): (&str, Vec<u8>) = match name.as_str() {
        "guide.pdf" => (
            "application/pdf",
            pdf(
                "A guide to burrowing animals",
                &[
                    &[
                        "Burrowing animals",
                        "The marmot digs deep burrows in alpine meadows.",
                    ],
                    &["The chinchilla bathes in fine volcanic dust."],
                ],
                false,
            ),
        ),
        // Served as a download, as many servers do: the bytes say what it is.
        "scan.pdf" => ("application/octet-stream", pdf("Scanned", &[], true)),
        "broken.pdf" => ("application/pdf", b"%PDF-1.7\n1 0 obj << /Type".to_vec()),
        "report.docx" => (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            docx(),
        ),
        "notes.txt" => (
            "text/plain; charset=utf-8",
            format!("Field notes\n===========\n\nThe {TEXT_WORD} hops across the desert at night.\n")
                .into_bytes(),
        ),
        "README.md" => (
            "text/markdown",
            format!("# Marsupials\n\nThe **{MARKDOWN_WORD}** is a [carnivorous](https://en.wikipedia.org/wiki/Quoll) marsupial.\n")
                .into_bytes(),
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    ([(header::CONTENT_TYPE, ty)], body).into_response()
}
