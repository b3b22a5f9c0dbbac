//! Hostile input for body decoding: compressed bodies and charset declarations. Every call
//! returns.

use std::io::Write;

use trawl_body::{decode_content, decode_html};
use trawl_core::mutate::each_mutation;

#[test]
fn content_decoding_and_charsets_never_panic() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"<html><body>hello</body></html>").unwrap();
    let gz = gz.finish().unwrap();
    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zl.write_all(b"<p>deflate</p>").unwrap();
    let zl = zl.finish().unwrap();
    each_mutation(&[&gz, &zl], 3000, |m| {
        let _ = decode_content(m, Some("gzip"), 1 << 20);
        let _ = decode_content(m, Some("deflate"), 1 << 20);
    });
    let html: &[u8] = b"\xef\xbb\xbf<meta http-equiv=\"content-type\" content=\"text/html; charset=iso-8859-1\"><meta charset=sjis>caf\xe9";
    each_mutation(&[html], 3000, |m| {
        let _ = decode_html(m, Some("text/html; charset=\"bogus\""));
        let _ = decode_html(m, None);
    });
}
