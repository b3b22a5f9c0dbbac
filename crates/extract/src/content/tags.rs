//! The element names the extractor tells apart, and what kind of box each one makes.

macro_rules! tags {
    ($($v:ident = $s:literal),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Tag { Root, Text, Other, $($v),* }
        impl Tag {
            pub fn from_name(name: &str) -> Tag {
                match name {
                    $($s => Tag::$v,)*
                    _ => Tag::Other,
                }
            }
            /// The element's name; empty for text, the root and unknown elements.
            pub fn name(self) -> &'static str {
                match self {
                    $(Tag::$v => $s,)*
                    _ => "",
                }
            }
        }
    };
}

tags! {
    Html = "html", Head = "head", Body = "body", Title = "title", Meta = "meta", Link = "link",
    Base = "base", Script = "script", Style = "style", Noscript = "noscript",
    Template = "template", Svg = "svg", Math = "math", Canvas = "canvas", Iframe = "iframe",
    Object = "object", Embed = "embed", Video = "video", Audio = "audio", Source = "source",
    Picture = "picture", Img = "img", Map = "map", Area = "area",
    Form = "form", Input = "input", Button = "button", Select = "select", Option = "option",
    Textarea = "textarea", Label = "label", Fieldset = "fieldset", Legend = "legend",
    Dialog = "dialog",
    Nav = "nav", Header = "header", Footer = "footer", Aside = "aside", Main = "main",
    Article = "article", Section = "section", Div = "div", Span = "span", P = "p",
    H1 = "h1", H2 = "h2", H3 = "h3", H4 = "h4", H5 = "h5", H6 = "h6",
    Ul = "ul", Ol = "ol", Li = "li", Dl = "dl", Dt = "dt", Dd = "dd", Menu = "menu",
    Table = "table", Thead = "thead", Tbody = "tbody", Tfoot = "tfoot", Tr = "tr", Td = "td",
    Th = "th", Caption = "caption", Colgroup = "colgroup", Col = "col",
    Pre = "pre", Code = "code", Kbd = "kbd", Samp = "samp", Var = "var", Tt = "tt",
    Blockquote = "blockquote", Q = "q", Cite = "cite", Figure = "figure", Figcaption = "figcaption",
    A = "a", Br = "br", Hr = "hr", Wbr = "wbr", B = "b", Strong = "strong", I = "i", Em = "em",
    U = "u", S = "s", Del = "del", Ins = "ins", Mark = "mark", Small = "small", Sub = "sub",
    Sup = "sup", Abbr = "abbr", Time = "time", Address = "address", Center = "center",
    Font = "font", Details = "details", Summary = "summary", Output = "output",
}

impl Tag {
    /// Never content: scripts, styles, embedded objects, form controls, document head.
    pub fn is_never_content(self) -> bool {
        matches!(
            self,
            Tag::Head
                | Tag::Title
                | Tag::Meta
                | Tag::Link
                | Tag::Base
                | Tag::Script
                | Tag::Style
                | Tag::Noscript
                | Tag::Template
                | Tag::Svg
                | Tag::Math
                | Tag::Canvas
                | Tag::Iframe
                | Tag::Object
                | Tag::Embed
                | Tag::Video
                | Tag::Audio
                | Tag::Source
                | Tag::Picture
                | Tag::Map
                | Tag::Input
                | Tag::Button
                | Tag::Select
                | Tag::Option
                | Tag::Textarea
                | Tag::Dialog
                | Tag::Output
        )
    }

    /// Starts a new line of text (a block box in the default style sheet).
    pub fn is_block(self) -> bool {
        matches!(
            self,
            Tag::Root
                | Tag::Html
                | Tag::Body
                | Tag::Form
                | Tag::Fieldset
                | Tag::Legend
                | Tag::Nav
                | Tag::Header
                | Tag::Footer
                | Tag::Aside
                | Tag::Main
                | Tag::Article
                | Tag::Section
                | Tag::Div
                | Tag::P
                | Tag::H1
                | Tag::H2
                | Tag::H3
                | Tag::H4
                | Tag::H5
                | Tag::H6
                | Tag::Ul
                | Tag::Ol
                | Tag::Li
                | Tag::Dl
                | Tag::Dt
                | Tag::Dd
                | Tag::Menu
                | Tag::Table
                | Tag::Thead
                | Tag::Tbody
                | Tag::Tfoot
                | Tag::Tr
                | Tag::Td
                | Tag::Th
                | Tag::Caption
                | Tag::Pre
                | Tag::Blockquote
                | Tag::Figure
                | Tag::Figcaption
                | Tag::Hr
                | Tag::Address
                | Tag::Center
                | Tag::Details
                | Tag::Summary
        )
    }

    pub fn heading_level(self) -> Option<u8> {
        match self {
            Tag::H1 => Some(1),
            Tag::H2 => Some(2),
            Tag::H3 => Some(3),
            Tag::H4 => Some(4),
            Tag::H5 => Some(5),
            Tag::H6 => Some(6),
            _ => None,
        }
    }
}
