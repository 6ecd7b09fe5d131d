//! Reports: one Markdown file and one timeline picture per run, and a campaign's summary.
//!
//! A run's report gives its seed and shape, the faults as they were applied, the operations by
//! outcome, each checker's verdict with its anomalies, and the command that replays the schedule.

use std::fmt::Write as _;
use std::path::Path;

use annal_sim::history::Outcome;

use crate::plot::{self, Sample, SampleOutcome, Series, Span, Timeline};
use crate::run::RunReport;
use crate::workload::lock;

/// Size of the timeline picture.
const PLOT_SIZE: (u32, u32) = (1400, 820);

/// Operation counts of a run: (ok, failed, unknown) for writes and for reads.
pub fn counts(r: &RunReport) -> ((usize, usize, usize), (usize, usize, usize)) {
    let h = lock(&r.record.history);
    let (mut w, mut rd) = ((0, 0, 0), (0, 0, 0));
    for op in &h.ops {
        let slot = if op.kind.is_write() { &mut w } else { &mut rd };
        match classify(&op.outcome) {
            SampleOutcome::Ok => slot.0 += 1,
            SampleOutcome::Failed => slot.1 += 1,
            SampleOutcome::Unknown => slot.2 += 1,
        }
    }
    (w, rd)
}

fn classify(o: &Outcome) -> SampleOutcome {
    match o {
        Outcome::Unknown(_) | Outcome::Pending => SampleOutcome::Unknown,
        Outcome::Refused(_) | Outcome::Unexpected(_) => SampleOutcome::Failed,
        _ => SampleOutcome::Ok,
    }
}

/// The timeline of a run.
pub fn timeline(r: &RunReport) -> Timeline {
    let h = lock(&r.record.history);
    let mut series: Vec<Series> = (0..=r.spec.clients)
        .map(|c| Series {
            client: if c == r.spec.clients { "final reads".into() } else { format!("client {c}") },
            samples: Vec::new(),
        })
        .collect();
    let end_us = h.ops.iter().filter(|o| o.complete != u64::MAX).map(|o| o.complete).max().unwrap_or(0);
    for op in &h.ops {
        let Some(s) = series.get_mut(op.client) else { continue };
        let done = if op.complete == u64::MAX { end_us.max(op.invoke) } else { op.complete };
        let latency_ms = if op.complete == u64::MAX {
            crate::run::request_timeout().as_secs_f64() * 1e3
        } else {
            (done - op.invoke) as f64 / 1e3
        };
        s.samples.push(Sample { at_s: op.invoke as f64 / 1e6, latency_ms, outcome: classify(&op.outcome) });
    }
    let spans = r
        .applied
        .iter()
        .map(|a| Span {
            start_s: a.from_s,
            end_s: a.to_s,
            lane: a.planned.fault.lane().into(),
            label: a.description.clone(),
        })
        .collect();
    Timeline {
        title: format!("annal-netns seed {} on {} nodes", r.spec.seed, r.spec.nodes),
        duration_s: (end_us as f64 / 1e6).max(r.spec.duration.as_secs_f64()),
        spans,
        series,
    }
}

/// Writes `report.md` and `timeline.png` of a run into its directory; returns the Markdown.
pub fn write_run(r: &RunReport) -> Result<String, String> {
    let png = plot::render(&timeline(r), PLOT_SIZE.0, PLOT_SIZE.1);
    let dir = &r.spec.out;
    std::fs::write(dir.join("timeline.png"), png).map_err(|e| format!("{}: {e}", dir.display()))?;
    let md = markdown(r);
    std::fs::write(dir.join("report.md"), &md).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !r.passed() {
        // The whole history, one operation per line, beside the anomalies that cite it.
        let h = lock(&r.record.history);
        let mut text = String::with_capacity(h.ops.len() * 96);
        for op in &h.ops {
            let _ = writeln!(text, "{op}");
        }
        for line in lock(&r.record.consumer_log).iter() {
            let _ = writeln!(text, "consumer: {line}");
        }
        std::fs::write(dir.join("history.txt"), text).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(md)
}

/// The Markdown of a run.
pub fn markdown(r: &RunReport) -> String {
    let mut m = String::new();
    let verdict = if r.passed() { "passed" } else { "FAILED" };
    let _ = writeln!(m, "# annal-netns: seed {} on {} nodes — {verdict}\n", r.spec.seed, r.spec.nodes);
    let only = if r.spec.faults.is_empty() {
        String::new()
    } else {
        format!(" --faults {}", r.spec.faults.join(","))
    };
    let _ = writeln!(
        m,
        "Replay the schedule: `annal-netns run --seed {} --nodes {} --duration {}{only}`\n",
        r.spec.seed,
        r.spec.nodes,
        r.spec.duration.as_secs()
    );
    let ((wo, wf, wu), (ro, rf, ru)) = counts(r);
    let _ = writeln!(m, "| | ok | failed | unknown |\n|---|---:|---:|---:|");
    let _ = writeln!(m, "| appends | {wo} | {wf} | {wu} |\n| reads | {ro} | {rf} | {ru} |");
    let all_reads = lock(&r.record.all_reads).len();
    let delivered = lock(&r.record.delivered).len();
    let _ = writeln!(
        m,
        "\n$all reads: {all_reads}; subscription deliveries: {delivered}; node starts: {}; converged {:.1} s after the final heal; slow links with {}.\n",
        r.starts,
        r.converged_after_s,
        if r.netem { "tc netem" } else { "a tbf rate limit (this kernel has no netem)" }
    );
    let _ = writeln!(
        m,
        "![timeline](timeline.png)\n\n## Faults\n\n| from (s) | to (s) | fault |\n|---:|---:|---|"
    );
    for a in &r.applied {
        let _ = writeln!(m, "| {:.1} | {:.1} | {} |", a.from_s, a.to_s, a.description);
    }
    let _ = writeln!(m, "\n## Checkers\n");
    for (name, found) in &r.anomalies {
        if found.is_empty() {
            let _ = writeln!(m, "- {name}: passed");
        } else {
            let _ = writeln!(m, "- **{name}: {} anomalies**", found.len());
            for f in found {
                let _ = writeln!(m, "\n```\n{f}\n```");
            }
        }
    }
    if !r.passed() {
        let _ = writeln!(
            m,
            "\nThe nodes' logs and the whole history are beside this report (`node*.log`, `history.txt`)."
        );
    }
    m
}

/// A campaign's summary: one row per run.
pub fn summary(runs: &[RunReport], wall_s: f64) -> String {
    let mut m = String::new();
    let failed = runs.iter().filter(|r| !r.passed()).count();
    let faults: usize = runs.iter().map(|r| r.applied.len()).sum();
    let ops: usize = runs.iter().map(|r| lock(&r.record.history).ops.len()).sum();
    let _ = writeln!(
        m,
        "# annal-netns campaign\n\n{} runs in {:.0} min; {faults} faults injected; {ops} operations; {failed} failed.\n",
        runs.len(),
        wall_s / 60.0
    );
    let _ =
        writeln!(m, "| seed | nodes | faults | appends ok/failed/unknown | reads ok | anomalies | report |");
    let _ = writeln!(m, "|---:|---:|---:|---|---:|---:|---|");
    for r in runs {
        let ((wo, wf, wu), (ro, _, _)) = counts(r);
        let anomalies: usize = r.anomalies.iter().map(|(_, a)| a.len()).sum();
        let dir = r.spec.out.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(
            m,
            "| {} | {} | {} | {wo}/{wf}/{wu} | {ro} | {anomalies} | [{dir}]({dir}/report.md) |",
            r.spec.seed,
            r.spec.nodes,
            r.applied.len()
        );
    }
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in runs {
        for a in &r.applied {
            *kinds.entry(a.planned.fault.lane()).or_default() += 1;
        }
    }
    let _ = writeln!(m, "\nFaults by kind: {kinds:?}");
    m
}

/// Writes the campaign summary into `dir/README.md`.
pub fn write_summary(dir: &Path, runs: &[RunReport], wall_s: f64) -> Result<(), String> {
    std::fs::write(dir.join("README.md"), summary(runs, wall_s))
        .map_err(|e| format!("{}: {e}", dir.display()))
}
