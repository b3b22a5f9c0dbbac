//! Calendar days read from the many ways pages write them: ISO stamps, `12.05.2020`,
//! `May 12, 2020`, `12 мая 2020`, `2020年5月12日`, `2020. 5. 12.`, in any script's digits.
//!
//! Only whole days count: a month without its day is no publication date.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Day {
    pub y: u16,
    pub m: u8,
    pub d: u8,
}

/// Years before the web's news archives (htmldate's floor too) are page furniture or
/// birthdays, not publication dates.
const MIN_YEAR: u16 = 1995;

fn max_day() -> Day {
    static MAX: LazyLock<Day> = LazyLock::new(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        // A day of slack for time zones ahead of UTC.
        civil_from_days((secs / 86_400) as i64 + 1)
    });
    *MAX
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> Day {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as u16;
    Day { y, m, d }
}

impl Day {
    pub fn new(y: u32, m: u32, d: u32) -> Option<Day> {
        let leap = y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
        let days = match m {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return None,
        };
        if !(MIN_YEAR as u32..=9999).contains(&y) || d == 0 || d > days {
            return None;
        }
        let day = Day {
            y: y as u16,
            m: m as u8,
            d: d as u8,
        };
        (day <= max_day()).then_some(day)
    }

    pub fn iso(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.y, self.m, self.d)
    }
}

/// Decimal digits of other scripts (Arabic-Indic, Persian, Devanagari, Bengali, Thai,
/// full-width) as ASCII, so one set of patterns reads them all.
pub fn ascii_digits(s: &str) -> Cow<'_, str> {
    const ZEROS: [u32; 6] = [0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10];
    let digit = |c: char| {
        let c = c as u32;
        ZEROS
            .iter()
            .find(|&&z| (z..z + 10).contains(&c))
            .map(|z| char::from(b'0' + (c - z) as u8))
    };
    if s.is_ascii() || !s.chars().any(|c| digit(c).is_some()) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(|c| digit(c).unwrap_or(c)).collect())
}

/// Month names and their abbreviations in the languages news is written in, lower-cased,
/// with the inflected forms dates use (`мая`, `травня`, `maja`).
static MONTHS: LazyLock<HashMap<&'static str, u8>> = LazyLock::new(|| {
    let table: [&[&str]; 12] = [
        &[
            "january",
            "jan",
            "januar",
            "jänner",
            "janvier",
            "janv",
            "enero",
            "ene",
            "gennaio",
            "gen",
            "janeiro",
            "januari",
            "januar",
            "январь",
            "января",
            "янв",
            "січень",
            "січня",
            "ocak",
            "styczeń",
            "stycznia",
            "sty",
            "leden",
            "ledna",
            "ianuarie",
            "tammikuu",
            "tammikuuta",
            "január",
            "jaanuar",
            "sausio",
            "janvāris",
            "siječnja",
            "siječanj",
            "ιανουαρίου",
            "ιανουάριος",
            "ژانویه",
            "يناير",
            "जनवरी",
        ],
        &[
            "february",
            "feb",
            "februar",
            "février",
            "févr",
            "fevrier",
            "febrero",
            "febbraio",
            "fevereiro",
            "fev",
            "februari",
            "февраль",
            "февраля",
            "фев",
            "лютий",
            "лютого",
            "şubat",
            "subat",
            "luty",
            "lutego",
            "lut",
            "únor",
            "února",
            "februarie",
            "helmikuu",
            "helmikuuta",
            "február",
            "veebruar",
            "vasario",
            "februāris",
            "veljače",
            "φεβρουαρίου",
            "φεβρουάριος",
            "فوریه",
            "فبراير",
            "फ़रवरी",
            "फरवरी",
        ],
        &[
            "march",
            "mar",
            "märz",
            "mars",
            "marzo",
            "março",
            "marco",
            "maart",
            "mrt",
            "март",
            "марта",
            "березень",
            "березня",
            "mart",
            "marzec",
            "marca",
            "březen",
            "března",
            "martie",
            "maaliskuu",
            "maaliskuuta",
            "március",
            "märts",
            "kovo",
            "marts",
            "ožujka",
            "μαρτίου",
            "μάρτιος",
            "مارس",
            "मार्च",
        ],
        &[
            "april",
            "apr",
            "avril",
            "avr",
            "abril",
            "abr",
            "aprile",
            "apr",
            "апрель",
            "апреля",
            "апр",
            "квітень",
            "квітня",
            "nisan",
            "kwiecień",
            "kwietnia",
            "kwi",
            "duben",
            "dubna",
            "aprilie",
            "huhtikuu",
            "huhtikuuta",
            "április",
            "aprill",
            "balandžio",
            "aprīlis",
            "travnja",
            "απριλίου",
            "απρίλιος",
            "آوریل",
            "أبريل",
            "ابريل",
            "अप्रैल",
        ],
        &[
            "may",
            "mai",
            "mayo",
            "maggio",
            "mag",
            "maio",
            "mei",
            "май",
            "мая",
            "травень",
            "травня",
            "mayıs",
            "mayis",
            "maj",
            "maja",
            "květen",
            "května",
            "toukokuu",
            "toukokuuta",
            "május",
            "gegužės",
            "maijs",
            "svibnja",
            "μαΐου",
            "μάιος",
            "مه",
            "مايو",
            "मई",
        ],
        &[
            "june",
            "jun",
            "juni",
            "juin",
            "junio",
            "giugno",
            "giu",
            "junho",
            "июнь",
            "июня",
            "июн",
            "червень",
            "червня",
            "haziran",
            "czerwiec",
            "czerwca",
            "cze",
            "červen",
            "června",
            "iunie",
            "kesäkuu",
            "kesäkuuta",
            "június",
            "juuni",
            "birželio",
            "jūnijs",
            "lipnja",
            "ιουνίου",
            "ιούνιος",
            "ژوئن",
            "يونيو",
            "जून",
        ],
        &[
            "july",
            "jul",
            "juli",
            "juillet",
            "juil",
            "julio",
            "luglio",
            "lug",
            "julho",
            "июль",
            "июля",
            "июл",
            "липень",
            "липня",
            "temmuz",
            "lipiec",
            "lipca",
            "lip",
            "červenec",
            "července",
            "iulie",
            "heinäkuu",
            "heinäkuuta",
            "július",
            "juuli",
            "liepos",
            "jūlijs",
            "srpnja",
            "ιουλίου",
            "ιούλιος",
            "ژوئیه",
            "يوليو",
            "जुलाई",
        ],
        &[
            "august",
            "aug",
            "août",
            "aout",
            "agosto",
            "ago",
            "augustus",
            "augusti",
            "август",
            "августа",
            "авг",
            "серпень",
            "серпня",
            "ağustos",
            "agustos",
            "sierpień",
            "sierpnia",
            "sie",
            "srpen",
            "srpna",
            "elokuu",
            "elokuuta",
            "augusztus",
            "rugpjūčio",
            "augusts",
            "kolovoza",
            "αυγούστου",
            "αύγουστος",
            "اوت",
            "أغسطس",
            "اغسطس",
            "अगस्त",
        ],
        &[
            "september",
            "sep",
            "sept",
            "septembre",
            "septiembre",
            "settembre",
            "set",
            "setembro",
            "сентябрь",
            "сентября",
            "сен",
            "вересень",
            "вересня",
            "eylül",
            "eylul",
            "wrzesień",
            "września",
            "wrz",
            "září",
            "septembrie",
            "syyskuu",
            "syyskuuta",
            "szeptember",
            "septembris",
            "rugsėjo",
            "rujna",
            "σεπτεμβρίου",
            "σεπτέμβριος",
            "سپتامبر",
            "سبتمبر",
            "सितंबर",
            "सितम्बर",
        ],
        &[
            "october",
            "oct",
            "oktober",
            "okt",
            "octobre",
            "octubre",
            "ottobre",
            "ott",
            "outubro",
            "out",
            "октябрь",
            "октября",
            "окт",
            "жовтень",
            "жовтня",
            "ekim",
            "październik",
            "października",
            "paź",
            "říjen",
            "října",
            "octombrie",
            "lokakuu",
            "lokakuuta",
            "október",
            "spalio",
            "oktobris",
            "listopada",
            "οκτωβρίου",
            "οκτώβριος",
            "اکتبر",
            "أكتوبر",
            "اكتوبر",
            "अक्टूबर",
        ],
        &[
            "november",
            "nov",
            "novembre",
            "noviembre",
            "novembro",
            "ноябрь",
            "ноября",
            "ноя",
            "листопад",
            "листопада",
            "kasım",
            "kasim",
            "listopad",
            "lis",
            "noiembrie",
            "marraskuu",
            "marraskuuta",
            "lapkričio",
            "novembris",
            "studenoga",
            "νοεμβρίου",
            "νοέμβριος",
            "نوامبر",
            "نوفمبر",
            "नवंबर",
            "नवम्बर",
        ],
        &[
            "december",
            "dec",
            "dezember",
            "dez",
            "décembre",
            "decembre",
            "déc",
            "diciembre",
            "dic",
            "dicembre",
            "dezembro",
            "декабрь",
            "декабря",
            "дек",
            "грудень",
            "грудня",
            "aralık",
            "aralik",
            "grudzień",
            "grudnia",
            "gru",
            "prosinec",
            "prosince",
            "decembrie",
            "joulukuu",
            "joulukuuta",
            "detsember",
            "gruodžio",
            "decembris",
            "prosinca",
            "δεκεμβρίου",
            "δεκέμβριος",
            "دسامبر",
            "ديسمبر",
            "दिसंबर",
            "दिसम्बर",
        ],
    ];
    let mut map = HashMap::new();
    for (i, names) in table.iter().enumerate() {
        for n in *names {
            // The first language to claim a spelling keeps it ("mar", "lis").
            map.entry(*n).or_insert(i as u8 + 1);
        }
    }
    map
});

pub fn month(word: &str) -> Option<u8> {
    let w = word.trim_end_matches('.').to_lowercase();
    MONTHS.get(w.as_str()).copied()
}

static NUMERIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // 2020-05-12, 2020/05/12, 2020.05.12, 2020. 5. 12.
        r"(?P<y1>\d{4})(?:-|/|\.\s?)(?P<m1>\d{1,2})(?:-|/|\.\s?)(?P<d1>\d{1,2})(?:[^\d]|$)",
        // 2020年5月12日, 2020년 5월 12일
        r"|(?P<y2>\d{4})\s*[年년]\s*(?P<m2>\d{1,2})\s*[月월]\s*(?P<d2>\d{1,2})",
        // 12.05.2020, 12/05/2020, 05/12/2020
        r"|(?:^|[^\d])(?P<a3>\d{1,2})(?P<s3>[./-])\s?(?P<b3>\d{1,2})[./-]\s?(?P<y3>\d{4})",
    ))
    .expect("numeric date pattern")
});

static WORDED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // 12 May 2020, 12. Mai 2020, 12 de mayo de 2020, 12 мая 2020 г.
        r"(?:^|[^\d])(?P<d1>\d{1,2})(?:st|nd|rd|th|er|º|\.)?\s*(?:de\s+)?(?P<w1>\p{L}+\.?)",
        r",?\s*(?:de\s+|del\s+)?(?P<y1>\d{4})",
        // May 12, 2020; May 12th 2020
        r"|(?P<w2>\p{L}+\.?)\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{4})",
        // 2020. május 12.
        r"|(?P<y3>\d{4})\.?\s+(?P<w3>\p{L}+\.?)\s+(?P<d3>\d{1,2})(?:[^\d]|$)",
    ))
    .expect("worded date pattern")
});

fn num(c: &regex::Captures<'_>, k: &str) -> Option<u32> {
    c.name(k)?.as_str().parse().ok()
}

/// The first whole day written in `s`, in any of the forms above.
pub fn find(s: &str) -> Option<Day> {
    let s = ascii_digits(s);
    let s = s.as_ref();
    let mut best: Option<(usize, Day)> = None;
    let mut keep = |at: usize, day: Option<Day>| {
        if let Some(day) = day
            && best.is_none_or(|(b, _)| at < b)
        {
            best = Some((at, day));
        }
    };
    if s.bytes().any(|b| b.is_ascii_digit()) {
        for c in NUMERIC.captures_iter(s) {
            let at = c.get(0).map_or(0, |m| m.start());
            let day = if let Some(y) = num(&c, "y1") {
                Day::new(y, num(&c, "m1")?, num(&c, "d1")?)
            } else if let Some(y) = num(&c, "y2") {
                Day::new(y, num(&c, "m2")?, num(&c, "d2")?)
            } else {
                let (a, b, y) = (num(&c, "a3")?, num(&c, "b3")?, num(&c, "y3")?);
                // Day first, as most of the world writes it, unless only month first can be
                // right, or the separator is the slash of American dates.
                let us = c.name("s3").is_some_and(|m| m.as_str() == "/");
                if b > 12 || (us && a <= 12) {
                    Day::new(y, a, b)
                } else {
                    Day::new(y, b, a)
                }
            };
            if day.is_some() {
                keep(at, day);
                break;
            }
        }
        for c in WORDED.captures_iter(s) {
            let at = c.get(0).map_or(0, |m| m.start());
            let (w, d, y) = if let Some(w) = c.name("w1") {
                (w, num(&c, "d1"), num(&c, "y1"))
            } else if let Some(w) = c.name("w2") {
                (w, num(&c, "d2"), num(&c, "y2"))
            } else if let Some(w) = c.name("w3") {
                (w, num(&c, "d3"), num(&c, "y3"))
            } else {
                continue;
            };
            let day = month(w.as_str()).and_then(|m| Day::new(y?, u32::from(m), d?));
            if day.is_some() {
                keep(at, day);
                break;
            }
        }
    }
    best.map(|(_, d)| d)
}

/// A date in a URL's path: `/2020/05/12/`, `/2020-05-12-title`, `/20200512/`.
pub fn in_url(path: &str) -> Option<Day> {
    static URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?:^|[/_-])(?P<y>(?:19|20)\d{2})(?:[/_-](?P<m>\d{1,2})[/_-](?P<d>\d{1,2})|(?P<m2>[01]\d)(?P<d2>[0-3]\d))(?:[/_.-]|$)",
        )
        .expect("url date pattern")
    });
    URL.captures_iter(path).find_map(|c| {
        let y = num(&c, "y")?;
        match (num(&c, "m"), num(&c, "d")) {
            (Some(m), Some(d)) => Day::new(y, m, d),
            _ => Day::new(y, num(&c, "m2")?, num(&c, "d2")?),
        }
    })
}

/// A stamp as the product reports it: an ISO 8601 value kept as written (its time and zone
/// are worth keeping), anything else as the day it names.
pub fn normalise(value: &str) -> Option<String> {
    let v = value.trim();
    let day = find(v)?;
    let iso = day.iso();
    if v.starts_with(&iso) && v.len() <= 40 {
        Some(v.to_string())
    } else {
        Some(iso)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Option<String> {
        find(s).map(|d| d.iso())
    }

    #[test]
    fn reads_the_world_s_forms() {
        assert_eq!(
            f("2020-06-07T10:00:00+03:00").as_deref(),
            Some("2020-06-07")
        );
        assert_eq!(f("Posted 07.06.2020 10:12").as_deref(), Some("2020-06-07"));
        assert_eq!(f("June 7th, 2020").as_deref(), Some("2020-06-07"));
        assert_eq!(f("7 червня 2020, 12:00").as_deref(), Some("2020-06-07"));
        assert_eq!(f("7 de junio de 2020").as_deref(), Some("2020-06-07"));
        assert_eq!(f("2020年6月7日").as_deref(), Some("2020-06-07"));
        assert_eq!(f("2020. 6. 7. 오전").as_deref(), Some("2020-06-07"));
        assert_eq!(
            f("۱۳۹۹-۰۳-۱۸").as_deref(),
            None,
            "a Solar Hijri year is not 1399 AD"
        );
        assert_eq!(f("٠٧/٠٦/٢٠٢٠").as_deref(), Some("2020-07-06"));
        assert_eq!(f("7 Haziran 2020 Pazar").as_deref(), Some("2020-06-07"));
        assert_eq!(f("2020. június 7.").as_deref(), Some("2020-06-07"));
    }

    #[test]
    fn refuses_what_is_no_day() {
        assert_eq!(f("June 2020"), None);
        assert_eq!(f("version 1.2.3"), None);
        assert_eq!(f("2020-13-45"), None);
        assert_eq!(f("31.02.2020"), None);
        assert_eq!(f("12 may 1980"), None, "before the floor");
        assert_eq!(f("1 January 9000"), None, "after today");
        assert_eq!(f("call 12 May, room 2020"), None);
    }

    #[test]
    fn url_dates() {
        assert_eq!(
            in_url("/2020/06/07/title").map(|d| d.iso()).as_deref(),
            Some("2020-06-07")
        );
        assert_eq!(
            in_url("/news/20200607/x").map(|d| d.iso()).as_deref(),
            Some("2020-06-07")
        );
        assert_eq!(in_url("/2020/06/title"), None);
        assert_eq!(in_url("/item/12345678"), None);
    }

    #[test]
    fn keeps_iso_stamps_whole() {
        assert_eq!(
            normalise(" 2020-06-07T10:00:00Z ").as_deref(),
            Some("2020-06-07T10:00:00Z")
        );
        assert_eq!(
            normalise("Sun, 07 Jun 2020 10:00:00 GMT").as_deref(),
            Some("2020-06-07")
        );
        assert_eq!(normalise("soon"), None);
    }
}
