//! The exposition formats: Prometheus text 0.0.4 and OpenMetrics 1.0, under either naming.
//!
//! Names are given without prefix and without a counter's `_total`; the [`Naming`] adds the
//! prefix (`kurrentdb_` or `eventstore_`) and decides whether counters end in `_total`
//! (KurrentDB's names do, the 23.10/24.10 names do not). Names starting with `process_` are the
//! Prometheus conventions and keep their name under both namings. Invariants: every family has
//! its `# HELP` and `# TYPE` line before its samples; a family is written once; label values are
//! escaped; an OpenMetrics document ends with `# EOF`.

use std::fmt::Write;

use super::instruments::HistogramSnapshot;

/// Which metric names the node serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// KurrentDB's: `kurrentdb_*`, counters end in `_total`.
    Kurrent,
    /// EventStoreDB 23.10/24.10's: `eventstore_*`, counters without `_total`, always plain text.
    Legacy,
}

/// The document format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for under `naming` (legacy naming is plain text only).
    pub fn negotiate(accept: Option<&str>, naming: Naming) -> Format {
        match accept {
            Some(a) if naming == Naming::Kurrent && a.contains("application/openmetrics-text") => {
                Format::OpenMetrics
            }
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of a document in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// Only goes up (resets at a restart).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

/// A sample's value.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    /// An integer.
    U(u64),
    /// A float.
    F(f64),
}

impl From<u64> for Num {
    fn from(v: u64) -> Num {
        Num::U(v)
    }
}
impl From<f64> for Num {
    fn from(v: f64) -> Num {
        Num::F(v)
    }
}
impl From<i64> for Num {
    fn from(v: i64) -> Num {
        if v >= 0 {
            Num::U(v as u64)
        } else {
            Num::F(v as f64)
        }
    }
}
impl From<bool> for Num {
    fn from(v: bool) -> Num {
        Num::U(u64::from(v))
    }
}

fn write_num(out: &mut String, v: Num) {
    match v {
        Num::U(u) => {
            let _ = write!(out, "{u}");
        }
        Num::F(f) if f.is_nan() => out.push_str("NaN"),
        Num::F(f) if f.is_infinite() => out.push_str(if f > 0.0 { "+Inf" } else { "-Inf" }),
        Num::F(f) => {
            let _ = write!(out, "{f}");
        }
    }
}

fn escape_label(out: &mut String, v: &str) {
    if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A metrics document being written.
pub struct Exposition {
    out: String,
    naming: Naming,
    format: Format,
    #[cfg(debug_assertions)]
    seen: std::collections::BTreeSet<String>,
}

/// One family being written: its samples follow its header.
pub struct Family<'a> {
    doc: &'a mut Exposition,
    /// The name samples carry (with `_total` for a counter when the naming wants it).
    sample: String,
}

impl Exposition {
    /// An empty document.
    pub fn new(naming: Naming, format: Format) -> Exposition {
        Exposition::with_capacity(naming, format, 16 << 10)
    }

    /// An empty document with room for `bytes` (the size of the previous one).
    pub fn with_capacity(naming: Naming, format: Format, bytes: usize) -> Exposition {
        Exposition {
            out: String::with_capacity(bytes),
            naming,
            format,
            #[cfg(debug_assertions)]
            seen: Default::default(),
        }
    }

    /// The naming in force.
    pub fn naming(&self) -> Naming {
        self.naming
    }

    /// The full name of `base` under the naming (without a counter's suffix).
    pub fn full_name(&self, base: &str) -> String {
        if base.starts_with("process_") {
            return base.to_owned();
        }
        match self.naming {
            Naming::Kurrent => format!("kurrentdb_{base}"),
            Naming::Legacy => format!("eventstore_{base}"),
        }
    }

    /// Starts the family `base` (no prefix, no `_total`). `legacy` renames it under the legacy
    /// naming (e.g. `proc_up_time` for `proc_up_time_seconds`).
    pub fn family(&mut self, base: &str, legacy: Option<&str>, ty: Type, help: &str) -> Family<'_> {
        let base = match (self.naming, legacy) {
            (Naming::Legacy, Some(l)) => l,
            _ => base,
        };
        let name = self.full_name(base);
        let total = ty == Type::Counter && (self.naming == Naming::Kurrent || name.starts_with("process_"));
        let sample = if total { format!("{name}_total") } else { name.clone() };
        // Prometheus text names the family as its samples are named; OpenMetrics names a
        // counter's family without `_total`.
        let family = if self.format == Format::OpenMetrics { name } else { sample.clone() };
        #[cfg(debug_assertions)]
        assert!(self.seen.insert(family.clone()), "metric family {family} written twice");
        let kind = match ty {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        };
        let out = &mut self.out;
        let _ = write!(out, "# HELP {family} ");
        for c in help.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        let _ = writeln!(out, "\n# TYPE {family} {kind}");
        Family { doc: self, sample }
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

impl Family<'_> {
    fn line(&mut self, suffix: &str, labels: &[(&str, &str)], extra: Option<(&str, &str)>, v: Num) {
        let out = &mut self.doc.out;
        out.push_str(&self.sample);
        out.push_str(suffix);
        let all = labels.iter().copied().chain(extra);
        let mut first = true;
        for (k, val) in all {
            out.push(if first { '{' } else { ',' });
            first = false;
            out.push_str(k);
            out.push_str("=\"");
            escape_label(out, val);
            out.push('"');
        }
        if !first {
            out.push('}');
        }
        out.push(' ');
        write_num(out, v);
        out.push('\n');
    }

    /// One sample of a counter or gauge.
    pub fn sample(&mut self, labels: &[(&str, &str)], v: impl Into<Num>) -> &mut Self {
        self.line("", labels, None, v.into());
        self
    }

    /// One histogram's series (`_bucket` per bound and `+Inf`, `_sum`, `_count`).
    pub fn histogram(&mut self, labels: &[(&str, &str)], h: &HistogramSnapshot) -> &mut Self {
        let mut le = String::new();
        for (bound, count) in &h.buckets {
            le.clear();
            write_num(&mut le, Num::F(*bound));
            self.line("_bucket", labels, Some(("le", &le)), Num::U(*count));
        }
        self.line("_bucket", labels, Some(("le", "+Inf")), Num::U(h.count));
        self.line("_sum", labels, None, Num::F(h.sum));
        self.line("_count", labels, None, Num::U(h.count));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(naming: Naming, format: Format) -> String {
        let mut d = Exposition::new(naming, format);
        d.family("io_events", None, Type::Counter, "Events \\ read\nand written.")
            .sample(&[("activity", "read")], 3u64)
            .sample(&[("activity", "written")], 4u64);
        d.family("checkpoints", None, Type::Gauge, "Positions.").sample(&[("name", "a\"b")], -1i64);
        d.family("proc_up_time_seconds", Some("proc_up_time"), Type::Counter, "Up.").sample(&[], 1.5);
        d.family("process_open_fds", None, Type::Gauge, "Fds.").sample(&[], 7u64);
        let h = super::super::instruments::Histogram::new(&[1_000, 2_000], 1e6);
        h.observe(1_500);
        d.family("flush_duration_seconds", None, Type::Histogram, "Flushes.").histogram(&[], &h.snapshot());
        d.finish()
    }

    #[test]
    fn kurrent_names_end_counters_in_total_and_openmetrics_names_the_family_without_it() {
        insta::assert_snapshot!(doc(Naming::Kurrent, Format::Prometheus));
        insta::assert_snapshot!(doc(Naming::Kurrent, Format::OpenMetrics));
    }

    #[test]
    fn legacy_names_have_the_eventstore_prefix_and_no_total() {
        let d = doc(Naming::Legacy, Format::Prometheus);
        assert!(
            d.contains("# TYPE eventstore_io_events counter\neventstore_io_events{activity=\"read\"} 3\n")
        );
        assert!(d.contains("eventstore_proc_up_time 1.5\n"), "{d}");
        assert!(d.contains("process_open_fds 7\n"));
        assert!(!d.contains("_total"), "{d}");
    }

    #[test]
    fn legacy_naming_is_served_as_plain_text_whatever_is_asked() {
        let om = Some("application/openmetrics-text; version=1.0.0");
        assert_eq!(Format::negotiate(om, Naming::Kurrent), Format::OpenMetrics);
        assert_eq!(Format::negotiate(om, Naming::Legacy), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("text/plain"), Naming::Kurrent), Format::Prometheus);
        assert_eq!(Format::negotiate(None, Naming::Kurrent), Format::Prometheus);
    }
}
