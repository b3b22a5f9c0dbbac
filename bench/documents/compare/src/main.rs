// pdf-compare ENGINE FILE OUT.txt: one PDF read by one engine (pdf-extract, lopdf,
// pdf_oxide, oxide-md, unpdf); prints "pages chars seconds" and writes the text.
use std::time::Instant;

fn run(engine: &str, bytes: &[u8]) -> Result<Vec<String>, String> {
    match engine {
        "pdf-extract" => pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| e.to_string()),
        "lopdf" => {
            let doc = lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?;
            let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
            Ok(pages
                .iter()
                .map(|p| doc.extract_text(&[*p]).unwrap_or_default())
                .collect())
        }
        "pdf_oxide" => {
            let doc = pdf_oxide::PdfDocument::from_bytes(bytes.to_vec()).map_err(|e| e.to_string())?;
            let n = doc.page_count().map_err(|e| e.to_string())?;
            Ok((0..n).map(|i| doc.extract_text(i).unwrap_or_default()).collect())
        }
        "oxide-md" => {
            let doc = pdf_oxide::PdfDocument::from_bytes(bytes.to_vec()).map_err(|e| e.to_string())?;
            let n = doc.page_count().map_err(|e| e.to_string())?;
            let o = pdf_oxide::converters::ConversionOptions { detect_headings: true, include_images: false, ..Default::default() };
            Ok((0..n).map(|i| doc.to_markdown(i, &o).unwrap_or_default()).collect())
        }
        "unpdf" => {
            let d = unpdf::Unpdf::new().parse_bytes(bytes).map_err(|e| e.to_string())?;
            Ok(vec![d.plain_text()])
        }
        other => Err(format!("unknown engine {other}")),
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&a[2]).unwrap();
    let t = Instant::now();
    let r = std::panic::catch_unwind(|| run(&a[1], &bytes));
    let secs = t.elapsed().as_secs_f64();
    match r {
        Ok(Ok(pages)) => {
            let text = pages.join("\n\u{c}\n");
            std::fs::write(&a[3], &text).unwrap();
            println!("{} {} {:.3}", pages.len(), text.chars().count(), secs);
        }
        Ok(Err(e)) => println!("ERR {e} {secs:.3}"),
        Err(_) => println!("PANIC {secs:.3}"),
    }
}
