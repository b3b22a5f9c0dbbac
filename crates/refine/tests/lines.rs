//! The renderer on constructs whose rendering the Python converter was asked for directly
//! (mineru-webkit 0.1.6 + ReScraper's clean-up); the page-by-page comparison over the shared
//! pages is `tests/parity.rs`.

use trawl_refine::lines::{number_lines, render_lines};

#[test]
fn blocks_lists_titles_and_images_as_the_converter_writes_them() {
    let html = "<html><body><div><p>a</p><figure><img src=x.png><figcaption>Cap</figcaption></figure> \
        tail text <b>y</b></div><p>Hello <img src=\"http://a/b.png\"> world <sub>2</sub>x</p>\
        <h2>T<i>it</i>le<br>two</h2><ul><li>one</li><li><p>two</p><p>three</p><ul><li>in</li></ul></li></ul></body></html>";
    // The figure takes its caption and its tail along (lxml's replace drops the tail); the
    // image cuts the paragraph; <sub> glues, then breaks a word.
    assert_eq!(
        render_lines(html),
        [
            "a",
            "y",
            "Hello",
            "world 2 x",
            "T it le",
            "two",
            "- one",
            "- two",
            "three",
            "- in"
        ]
    );
}

#[test]
fn scripts_forms_and_hidden_elements_are_dropped_code_is_fenced() {
    let html = "<html><head><title>Doc</title><script>var x=1;</script></head><body>\
        <form><input name=q><button>Go</button></form><div style=\"display:none\">hidden</div>\
        <p aria-hidden=\"true\">also hidden</p><p>Use <code>cargo</code>, then:</p>\
        <pre><code class=\"language-sh\">cargo build\n  --release</code></pre>\
        <table><tr><th>k</th><th>v</th></tr><tr><td>a | b</td><td>1</td></tr></table></body></html>";
    let lines = render_lines(html);
    assert_eq!(lines[0], "Doc");
    assert_eq!(lines[1], "Use `cargo` , then:");
    assert_eq!(&lines[2..5], ["```sh", "cargo build", "--release"]);
    assert_eq!(lines[5], "```");
    assert_eq!(&lines[6..], ["k v", "a \\ b 1"]);
    assert_eq!(
        number_lines(&lines[..2]),
        "<lid:1> Doc\n<lid:2> Use `cargo` , then:"
    );
}

#[test]
fn hostile_markup_renders_without_harm() {
    let deep = "<div>".repeat(20_000) + "deep text" + &"</div>".repeat(20_000);
    assert_eq!(render_lines(&deep), ["deep text"]);
    let junk = "<table><tr><td colspan=abc%>x<pre>\u{0}\u{7f}</pre><ul><li><h1>t</h1></ul></table>&#xFFFFFF;<svg width=1 height=1><path/></svg>";
    let _ = render_lines(junk);
    assert!(render_lines("").is_empty());
}
