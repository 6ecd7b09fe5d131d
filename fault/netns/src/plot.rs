//! Timeline pictures of fault-injection runs, rendered to PNG with `std` only.
//!
//! One image, three panels over a shared time axis (seconds since the start of the run): the
//! faults as bars, one row per lane; client throughput per time bucket (counted at completion);
//! and a log-scale latency scatter, one colour per client. This module owns the layout, a 5x7
//! bitmap font for printable ASCII and a minimal PNG encoder (zlib with stored blocks).
//!
//! Invariants: [`render`] never panics and its cost is linear in the number of spans and samples
//! (plus a sort of the spans): non-finite values are skipped, whatever lies outside
//! `0..=duration_s` is clipped, a duration that is not positive and finite counts as 1 s, and the
//! size is clamped to `320x240..=8192x8192`. [`encode_png`] always emits a complete PNG
//! (signature, IHDR, IDAT, IEND) with valid CRCs and a valid, uncompressed zlib stream.

use std::collections::HashMap;

/// A fault active over a time range, drawn as a bar in its lane.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Span {
    /// When the fault began, in seconds since the start of the run.
    pub start_s: f64,
    /// When it ended; equal to `start_s` for an instant fault (drawn 2 px wide).
    pub end_s: f64,
    /// The row it is drawn in, e.g. "partition" or "kill"; one row per distinct lane.
    pub lane: String,
    /// Text written inside or beside the bar when it fits.
    pub label: String,
}

/// What one client operation came to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SampleOutcome {
    /// It succeeded.
    Ok,
    /// It definitely did not take effect.
    Failed,
    /// Nobody knows (timeout, lost connection): drawn as a `+`.
    Unknown,
}

/// One completed (or given-up) client operation: when it was invoked and how long it took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Invocation time in seconds since the start of the run (the latency panel's x).
    pub at_s: f64,
    /// Time until the reply, or until the client gave up, in milliseconds.
    pub latency_ms: f64,
    /// How it ended.
    pub outcome: SampleOutcome,
}

/// One client's operations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Shown in the legend.
    pub client: String,
    /// In any order.
    pub samples: Vec<Sample>,
}

/// A whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Shown at the top.
    pub title: String,
    /// The x axis spans `0..=duration_s` (1 s when it is not positive and finite).
    pub duration_s: f64,
    /// The faults.
    pub spans: Vec<Span>,
    /// The clients' operations, one series per client.
    pub series: Vec<Series>,
}

// ------------------------------------------------------------------------------------------------
// Bounds and layout constants

/// Smallest image rendered; smaller requests are enlarged.
const MIN_WIDTH: u32 = 320;
const MIN_HEIGHT: u32 = 240;
/// Largest side rendered; larger requests are shrunk.
const MAX_SIDE: u32 = 8192;
/// Text is drawn at 2x from this size on.
const BIG_TEXT_MIN_WIDTH: i64 = 1280;
const BIG_TEXT_MIN_HEIGHT: i64 = 720;
/// The title is drawn one scale step larger than the text from this height on.
const BIG_TITLE_MIN_HEIGHT: i64 = 360;

/// Duration used when the timeline's is not positive and finite.
const DEFAULT_DURATION_S: f64 = 1.0;
/// Durations are clamped to this range, which keeps the tick arithmetic tame.
const MIN_DURATION_S: f64 = 1e-3;
const MAX_DURATION_S: f64 = 1e9;

/// Spacing unit between elements, in text pixels (times the text scale).
const PAD: i64 = 4;
/// Height of one fault lane, in text pixels.
const LANE_H: i64 = 11;
/// Gap between a lane's edge and its bars, in text pixels.
const BAR_INSET: i64 = 1;
/// A bar is at least this wide, so instant faults show.
const MIN_SPAN_PX: i64 = 2;
/// A bar gets a darker start edge from this width on.
const EDGE_MIN_BAR_PX: i64 = 6;
/// Labels are truncated, but not below this many characters.
const MIN_LABEL_CHARS: usize = 4;
/// How many following bars of a lane are checked for room beside a bar.
const LABEL_SCAN_MAX: usize = 64;
/// Longest lane name given room in the left margin (longer ones are truncated).
const LANE_NAME_MAX_CHARS: usize = 12;
/// The left margin always has room for y labels of this many characters.
const Y_LABEL_CHARS: usize = 6;
/// The left margin takes at most 1/this of the width.
const LEFT_MARGIN_MAX_FRACTION: i64 = 4;
/// Right margin in characters (room for half of the last x label).
const RIGHT_MARGIN_CHARS: i64 = 3;
/// Number of stacked panels.
const PANELS: i64 = 3;
/// Smallest panel height in pixels.
const MIN_PANEL_H: i64 = 12;
/// The faults panel takes at most this share of the panels' height.
const FAULTS_MAX_SHARE: f64 = 0.3;
/// The throughput panel's share of what the faults panel leaves.
const THROUGHPUT_SHARE: f64 = 0.4;
/// Inner vertical margin of the value panels, in text pixels.
const PLOT_INSET: i64 = 3;
/// Longest client name in the legend.
const LEGEND_NAME_MAX_CHARS: usize = 16;
/// Width of a legend swatch, in text pixels.
const SWATCH_W: i64 = 9;
/// Half-size of a cross marker, in text pixels.
const MARKER_R: i64 = 2;

/// The x axis has at most this many ticks (and at least 5 unless labels would overlap).
const MAX_TICKS: usize = 12;
/// How often a tick step may be coarsened to keep labels apart.
const MAX_STEP_TRIES: usize = 64;
/// Factor that moves a step to the next round one.
const STEP_BUMP: f64 = 1.01;
/// Round time steps in seconds from 1 s to a day; below 1-2-5 decades, above days in 1-2-5.
const TIME_STEPS_S: [f64; 18] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 10800.0,
    21600.0, 43200.0, 86400.0,
];
const DAY_S: f64 = 86400.0;
/// Mantissas of round values.
const NICE_MANTISSAS: [f64; 4] = [1.0, 2.0, 5.0, 10.0];
/// Relative slack in comparisons of round values.
const EPS: f64 = 1e-9;
/// Most decimals in a tick label.
const MAX_DECIMALS: f64 = 6.0;
/// Unit suffixes of large values.
const SI_SUFFIXES: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];

/// Throughput buckets are at least this long.
const MIN_BUCKET_S: f64 = 1.0;
/// There is at most one throughput bucket per this many pixels.
const PX_PER_BUCKET: i64 = 4;
/// The throughput axis has about this many steps.
const Y_TICKS_TARGET: f64 = 4.0;
/// Upper bound on throughput ticks.
const Y_TICKS_MAX: usize = 8;
const MS_PER_S: f64 = 1000.0;

/// Latencies below this are drawn at this (it keeps log10 finite).
const LATENCY_FLOOR_MS: f64 = 0.1;
/// Decades (as powers of ten) shown when there are no samples: 1 ms to 1 s.
const DEFAULT_DECADES: (i32, i32) = (0, 3);
/// Latency labels are at least this many text lines apart.
const LOG_TICK_GAP_LINES: i64 = 2;
/// Powers of ten up to this one are written out in full.
const MAX_PLAIN_EXPONENT: i32 = 4;

// ------------------------------------------------------------------------------------------------
// Colours

type Rgb = [u8; 3];

const WHITE: Rgb = [0xFF, 0xFF, 0xFF];
const BLACK: Rgb = [0x00, 0x00, 0x00];
const TEXT: Rgb = [0x22, 0x22, 0x22];
const MUTED: Rgb = [0x70, 0x70, 0x70];
const AXIS: Rgb = [0x99, 0x99, 0x99];
const GRID: Rgb = [0xE4, 0xE4, 0xE4];
const STRIPE: Rgb = [0xF5, 0xF5, 0xF5];
const BLUE: Rgb = [0x1F, 0x77, 0xB4];
const ORANGE: Rgb = [0xFF, 0x7F, 0x0E];
const GREEN: Rgb = [0x2C, 0xA0, 0x2C];
const RED: Rgb = [0xD6, 0x27, 0x28];
const PURPLE: Rgb = [0x94, 0x67, 0xBD];
const BROWN: Rgb = [0x8C, 0x56, 0x4B];
const PINK: Rgb = [0xE3, 0x77, 0xC2];
const OLIVE: Rgb = [0xBC, 0xBD, 0x22];
const CYAN: Rgb = [0x17, 0xBE, 0xCF];
const NAVY: Rgb = [0x39, 0x3B, 0x79];
/// Throughput of successful operations.
const OK_LINE: Rgb = GREEN;
/// Throughput of failed and unknown operations.
const BAD_LINE: Rgb = RED;
/// Client colours, cycled; also the colours of lanes without a colour of their own.
const PALETTE: [Rgb; 10] = [BLUE, ORANGE, GREEN, RED, PURPLE, BROWN, PINK, OLIVE, CYAN, NAVY];
/// Colours of well-known lanes, by name prefix.
const LANE_COLOURS: [(&str, Rgb); 6] = [
    ("partition", ORANGE),
    ("kill", RED),
    ("pause", PURPLE),
    ("clock", BLUE),
    ("disk", BROWN),
    ("net", CYAN),
];
/// Text on a bar is white below this luminance (0..=255), black above.
const LIGHT_TEXT_BELOW_LUMA: u32 = 150;
/// A bar's start edge is its colour times this numerator over 256.
const EDGE_SHADE: u16 = 160;

// ------------------------------------------------------------------------------------------------
// Font

/// Glyph size in pixels (a line of text is `GLYPH_H` high; descenders of g, j, p, q and y take one
/// more row), and the advance from one character to the next.
const GLYPH_W: usize = 5;
const GLYPH_H: i64 = 7;
const GLYPH_ROWS: i64 = GLYPH_H + 1;
const ADVANCE: i64 = 6;
const FIRST_CHAR: u32 = 32;
const LAST_CHAR: u32 = 126;
/// Drawn for characters outside the font.
const FALLBACK_CHAR: u32 = b'?' as u32;
/// Marks truncated text.
const ELLIPSIS: &str = "..";
/// Non-ASCII characters that have a readable ASCII stand-in.
const TRANSLITERATIONS: [(char, &str); 8] =
    [('±', "+-"), ('‰', "o/oo"), ('→', "->"), ('←', "<-"), ('—', "-"), ('–', "-"), ('×', "x"), ('µ', "u")];

/// 5x7 glyphs of ASCII 32..=126, one per entry: five column bytes, the leftmost in the highest
/// byte, bit 0 = top row, bit 7 = descender.
#[rustfmt::skip]
const FONT: [u64; (LAST_CHAR - FIRST_CHAR + 1) as usize] = [
    0x0000000000, 0x00005F0000, 0x0007000700, 0x147F147F14, 0x242A7F2A12, 0x2313086462, //  !"#$%
    0x3649552250, 0x0005030000, 0x001C224100, 0x0041221C00, 0x082A1C2A08, 0x08083E0808, // &'()*+
    0x0050300000, 0x0808080808, 0x0060600000, 0x2010080402, 0x3E5149453E, 0x00427F4000, // ,-./01
    0x4261514946, 0x2141454B31, 0x1814127F10, 0x2745454539, 0x3C4A494930, 0x0171090503, // 234567
    0x3649494936, 0x064949291E, 0x0036360000, 0x0056360000, 0x0814224100, 0x1414141414, // 89:;<=
    0x0041221408, 0x0201510906, 0x324979413E, 0x7E1111117E, 0x7F49494936, 0x3E41414122, // >?@ABC
    0x7F4141221C, 0x7F49494941, 0x7F09090101, 0x3E4149497A, 0x7F0808087F, 0x00417F4100, // DEFGHI
    0x2040413F01, 0x7F08142241, 0x7F40404040, 0x7F020C027F, 0x7F0408107F, 0x3E4141413E, // JKLMNO
    0x7F09090906, 0x3E4151215E, 0x7F09192946, 0x4649494931, 0x01017F0101, 0x3F4040403F, // PQRSTU
    0x1F2040201F, 0x3F4038403F, 0x6314081463, 0x0708700807, 0x6151494543, 0x007F414100, // VWXYZ[
    0x0204081020, 0x0041417F00, 0x0402010204, 0x4040404040, 0x0001020400, 0x2054545478, // \]^_`a
    0x7F48444438, 0x3844444420, 0x384444487F, 0x3854545418, 0x087E090102, 0x18A4A4A47C, // bcdefg
    0x7F08040478, 0x00447D4000, 0x0080847D00, 0x7F10284400, 0x00417F4000, 0x7C04180478, // hijklm
    0x7C08040478, 0x3844444438, 0xFC24242418, 0x18242424FC, 0x7C08040408, 0x4854545420, // nopqrs
    0x043F444020, 0x3C4040207C, 0x1C2040201C, 0x3C4030403C, 0x4428102844, 0x1CA0A0A07C, // tuvwxy
    0x4464544C44, 0x0008364100, 0x00007F0000, 0x0041360800, 0x0804081008,               // z{|}~
];

// ------------------------------------------------------------------------------------------------
// PNG constants

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1A, b'\n'];
/// IHDR: 8 bits per sample, colour type 2 (RGB), deflate, standard filters, no interlace.
const BIT_DEPTH: u8 = 8;
const COLOUR_TYPE_RGB: u8 = 2;
const IHDR_TAIL: [u8; 5] = [BIT_DEPTH, COLOUR_TYPE_RGB, 0, 0, 0];
const BYTES_PER_PIXEL: usize = 3;
/// Filter type "None", written before every row.
const FILTER_NONE: u8 = 0;
/// zlib header: deflate with a 32 KiB window, no dictionary, fastest ((0x78 << 8 | 0x01) % 31 == 0).
const ZLIB_HEADER: [u8; 2] = [0x78, 0x01];
/// Longest stored deflate block.
const STORED_BLOCK_MAX: usize = 0xFFFF;
/// Longest IDAT chunk written.
const IDAT_MAX: usize = 1 << 20;
/// Cap on the scanline buffer reserved up front (it grows past it if need be).
const RESERVE_MAX: usize = 1 << 28;
const ADLER_MOD: u32 = 65521;
/// Bytes that can be summed before the Adler-32 sums must be reduced.
const ADLER_NMAX: usize = 5552;
const CRC_POLY: u32 = 0xEDB8_8320;
const CRC_TABLE: [u32; 256] = crc_table();

// ------------------------------------------------------------------------------------------------
// Rendering

/// Renders `t` as a PNG of `width` x `height` pixels (RGB, 8 bit).
///
/// The size is clamped to `320x240..=8192x8192`. Never panics; see the module doc for what is
/// skipped and clipped.
pub fn render(t: &Timeline, width: u32, height: u32) -> Vec<u8> {
    let (w, h) = (width.clamp(MIN_WIDTH, MAX_SIDE), height.clamp(MIN_HEIGHT, MAX_SIDE));
    let mut c = Canvas::new(w, h);
    let lanes = Lanes::collect(&t.spans);
    let l = Layout::new(c.w, c.h, &lanes.names);
    let ax = TimeAxis::new(run_duration(t.duration_s), l.faults, l.s);
    draw_title(&mut c, &l, &t.title);
    draw_faults(&mut c, &l, &ax, &lanes, &t.spans);
    draw_throughput(&mut c, &l, &ax, &t.series);
    draw_latency(&mut c, &l, &ax, &t.series);
    draw_time_axis(&mut c, &l, &ax);
    encode_png(w, h, &c.px)
}

/// The length of the x axis: `duration_s` if it is positive and finite, clamped to sane bounds.
fn run_duration(d: f64) -> f64 {
    if d.is_finite() && d > 0.0 {
        d.clamp(MIN_DURATION_S, MAX_DURATION_S)
    } else {
        DEFAULT_DURATION_S
    }
}

/// Where everything goes. All panels share `x0..x1`.
struct Layout {
    /// Text scale (1 or 2).
    s: i64,
    pad: i64,
    title_scale: i64,
    faults: Rect,
    throughput: Rect,
    latency: Rect,
    lane_h: i64,
    lanes_shown: usize,
}

impl Layout {
    fn new(w: i64, h: i64, lane_names: &[String]) -> Layout {
        let s = if w >= BIG_TEXT_MIN_WIDTH && h >= BIG_TEXT_MIN_HEIGHT { 2 } else { 1 };
        let (pad, line) = (PAD * s, GLYPH_H * s);
        let title_scale = if h >= BIG_TITLE_MIN_HEIGHT { s + 1 } else { s };
        let header = line + pad / 2;
        let top = pad + GLYPH_H * title_scale + pad;
        let bottom = pad + line + pad / 2 + line + pad;
        let avail = (h - top - bottom - PANELS * header - (PANELS - 1) * pad).max(PANELS * MIN_PANEL_H);
        let lane_h = LANE_H * s;
        let faults_max = ((avail as f64 * FAULTS_MAX_SHARE) as i64).max(lane_h);
        let lanes_shown = lane_names.len().min(usize::try_from(faults_max / lane_h).unwrap_or(0));
        let faults_h = lane_h * lanes_shown.max(1) as i64;
        let rest = (avail - faults_h).max(0);
        let throughput_h = (rest as f64 * THROUGHPUT_SHARE) as i64;
        let (x0, x1) = (left_margin(w, s, lane_names), w - RIGHT_MARGIN_CHARS * ADVANCE * s);
        let faults = Rect::new(x0, top + header, x1, top + header + faults_h);
        let throughput = Rect::new(x0, faults.y1 + pad + header, x1, faults.y1 + pad + header + throughput_h);
        let latency_y0 = throughput.y1 + pad + header;
        let latency = Rect::new(x0, latency_y0, x1, latency_y0 + (rest - throughput_h));
        Layout { s, pad, title_scale, faults, throughput, latency, lane_h, lanes_shown }
    }

    /// Height of a line of text.
    fn line(&self) -> i64 {
        GLYPH_H * self.s
    }

    /// Top of the header text above `panel`.
    fn header_y(&self, panel: Rect) -> i64 {
        panel.y0 - self.pad / 2 - self.line()
    }

    /// The `i`-th row of the faults panel.
    fn lane_row(&self, i: usize) -> Rect {
        let y0 = self.faults.y0 + self.lane_h * i as i64;
        Rect::new(self.faults.x0, y0, self.faults.x1, y0 + self.lane_h)
    }

    /// Top of text centred vertically in `row`.
    fn text_y_in(&self, row: Rect) -> i64 {
        row.y0 + (row.height() - self.line()) / 2
    }
}

/// Room for lane names (up to a limit) and y labels, within a share of the width.
fn left_margin(w: i64, s: i64, lane_names: &[String]) -> i64 {
    let longest = lane_names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let chars = longest.clamp(Y_LABEL_CHARS, LANE_NAME_MAX_CHARS) as i64;
    (2 * PAD * s + chars * ADVANCE * s).min(w / LEFT_MARGIN_MAX_FRACTION)
}

/// The distinct lanes in order of first appearance (names made ASCII).
struct Lanes<'a> {
    names: Vec<String>,
    index: HashMap<&'a str, usize>,
}

impl<'a> Lanes<'a> {
    fn collect(spans: &'a [Span]) -> Lanes<'a> {
        let mut lanes = Lanes { names: Vec::new(), index: HashMap::new() };
        for sp in spans {
            if !lanes.index.contains_key(sp.lane.as_str()) {
                lanes.index.insert(sp.lane.as_str(), lanes.names.len());
                lanes.names.push(to_ascii(&sp.lane));
            }
        }
        lanes
    }
}

/// Maps seconds to pixels and knows the round tick step.
struct TimeAxis {
    d: f64,
    x0: i64,
    px: f64,
    step: f64,
}

impl TimeAxis {
    fn new(d: f64, plot: Rect, s: i64) -> TimeAxis {
        let px = (plot.width() - 1).max(1) as f64;
        let mut step = tick_step(d);
        for _ in 0..MAX_STEP_TRIES {
            let label_px = text_width(&fmt_plain(d, step), s) + 2 * ADVANCE * s;
            if step / d * px >= label_px as f64 {
                break;
            }
            step = nice_time_step(step * STEP_BUMP);
        }
        TimeAxis { d, x0: plot.x0, px, step }
    }

    /// The pixel column of `t` seconds (clamped to the axis).
    fn x(&self, t: f64) -> i64 {
        self.x0 + (t.clamp(0.0, self.d) / self.d * self.px).round() as i64
    }

    fn ticks(&self) -> impl Iterator<Item = f64> + '_ {
        (0..MAX_TICKS).map(|i| i as f64 * self.step).take_while(|&t| t <= self.d * (1.0 + EPS))
    }
}

/// The round step that gives 5 to 12 ticks over `d` seconds.
fn tick_step(d: f64) -> f64 {
    nice_time_step(d / (MAX_TICKS - 1) as f64)
}

/// The smallest round time step (…, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, …, 1 day, 2 days, …)
/// that is at least `x` seconds.
fn nice_time_step(x: f64) -> f64 {
    if x <= 1.0 {
        return nice_step(x);
    }
    TIME_STEPS_S
        .iter()
        .copied()
        .find(|&s| s >= x * (1.0 - EPS))
        .unwrap_or_else(|| DAY_S * nice_step(x / DAY_S))
}

/// The smallest 1-2-5 value (…, 0.5, 1, 2, 5, 10, …) that is at least `x`; 1 for nonsense.
fn nice_step(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f64.powi(x.log10().floor() as i32);
    let step = NICE_MANTISSAS.iter().map(|m| m * p).find(|&v| v >= x * (1.0 - EPS)).unwrap_or(10.0 * p);
    if step > 0.0 && step.is_finite() {
        step
    } else {
        1.0
    }
}

/// `v` with as many decimals as `step` needs.
fn fmt_plain(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0.0 } else { (-step.log10() - EPS).ceil().clamp(0.0, MAX_DECIMALS) };
    format!("{v:.*}", decimals as usize)
}

/// `v` like [`fmt_plain`], with a k/M/G suffix when the step is that large.
fn fmt_value(v: f64, step: f64) -> String {
    for (unit, suffix) in SI_SUFFIXES {
        if step >= unit {
            return format!("{}{suffix}", fmt_plain(v / unit, step / unit));
        }
    }
    fmt_plain(v, step)
}

/// `10^k` as a label: "0.1", "1", …, "10000", then "1e5".
fn fmt_pow10(k: i32) -> String {
    match k {
        k if k < 0 => fmt_plain(10f64.powi(k), 10f64.powi(k)),
        0..=MAX_PLAIN_EXPONENT => format!("{}", 10u32.pow(k.unsigned_abs())),
        _ => format!("1e{k}"),
    }
}

fn draw_title(c: &mut Canvas, l: &Layout, title: &str) {
    let text = fit(&to_ascii(title), c.w - 2 * l.pad, l.title_scale);
    c.text(l.pad, l.pad, &text, l.title_scale, TEXT);
}

/// Light vertical lines at the time ticks.
fn draw_time_grid(c: &mut Canvas, r: Rect, ax: &TimeAxis) {
    for t in ax.ticks() {
        let x = ax.x(t);
        c.fill(Rect::new(x, r.y0, x + 1, r.y1), GRID);
    }
}

/// The panel's name above it; returns the x where it ends.
fn draw_header(c: &mut Canvas, l: &Layout, panel: Rect, text: &str) -> i64 {
    c.text(l.pad, l.header_y(panel), text, l.s, TEXT)
}

/// Muted text in the middle of an empty panel.
fn draw_empty_note(c: &mut Canvas, l: &Layout, r: Rect, text: &str) {
    let x = r.x0 + (r.width() - text_width(text, l.s)) / 2;
    c.text(x, l.text_y_in(r), text, l.s, MUTED);
}

fn draw_time_axis(c: &mut Canvas, l: &Layout, ax: &TimeAxis) {
    let r = l.latency;
    let y = r.y1 + l.pad;
    for t in ax.ticks() {
        let x = ax.x(t);
        c.fill(Rect::new(x, r.y1, x + 1, r.y1 + l.pad / 2), AXIS);
        let label = fmt_plain(t, ax.step);
        let w = text_width(&label, l.s);
        c.text((x - w / 2).clamp(0, (c.w - w).max(0)), y, &label, l.s, TEXT);
    }
    let name = "seconds since start";
    let x = r.x0 + (r.width() - text_width(name, l.s)) / 2;
    c.text(x, y + l.line() + l.pad / 2, name, l.s, MUTED);
}

// ---- faults panel

/// A span in pixels, `x0..x1`, with its label.
struct Bar {
    x0: i64,
    x1: i64,
    label: String,
}

fn draw_faults(c: &mut Canvas, l: &Layout, ax: &TimeAxis, lanes: &Lanes, spans: &[Span]) {
    let r = l.faults;
    let hidden = lanes.names.len() - l.lanes_shown;
    let header =
        if hidden > 0 { format!("faults (+{hidden} lanes not shown)") } else { "faults".to_string() };
    draw_header(c, l, r, &header);
    for (i, name) in lanes.names.iter().take(l.lanes_shown).enumerate() {
        let row = l.lane_row(i);
        if i % 2 == 1 {
            c.fill(row, STRIPE);
        }
        c.text(l.pad, l.text_y_in(row), &fit(name, r.x0 - 2 * l.pad, l.s), l.s, TEXT);
    }
    draw_time_grid(c, r, ax);
    let bars = lane_bars(lanes, l.lanes_shown, spans, ax);
    c.set_clip(r);
    for (i, lane) in bars.iter().enumerate() {
        draw_lane(c, l, l.lane_row(i), lane, lane_colour(&lanes.names[i], i));
    }
    c.reset_clip();
    if bars.iter().all(Vec::is_empty) {
        draw_empty_note(c, l, r, "no faults");
    }
    c.outline(r, AXIS);
}

/// The bars of each shown lane, sorted by start.
fn lane_bars(lanes: &Lanes, shown: usize, spans: &[Span], ax: &TimeAxis) -> Vec<Vec<Bar>> {
    let mut out: Vec<Vec<Bar>> = (0..shown).map(|_| Vec::new()).collect();
    for sp in spans {
        let Some(&i) = lanes.index.get(sp.lane.as_str()) else { continue };
        let (Some(lane), Some((x0, x1))) = (out.get_mut(i), span_px(sp, ax)) else { continue };
        lane.push(Bar { x0, x1, label: sp.label.clone() });
    }
    for lane in &mut out {
        lane.sort_by_key(|b| (b.x0, b.x1));
    }
    out
}

/// A span's pixel columns `x0..x1`, clipped to the axis; None if it is not finite or not visible.
fn span_px(sp: &Span, ax: &TimeAxis) -> Option<(i64, i64)> {
    if !(sp.start_s.is_finite() && sp.end_s.is_finite()) {
        return None;
    }
    let (a, b) = (sp.start_s.min(sp.end_s), sp.start_s.max(sp.end_s));
    if b < 0.0 || a > ax.d {
        return None;
    }
    let x0 = ax.x(a);
    Some((x0, (ax.x(b) + 1).max(x0 + MIN_SPAN_PX)))
}

fn draw_lane(c: &mut Canvas, l: &Layout, row: Rect, bars: &[Bar], colour: Rgb) {
    let inset = BAR_INSET * l.s;
    let bar = |x0, x1| Rect::new(x0, row.y0 + inset, x1, row.y1 - inset);
    // Overlapping bars are filled as one run, so the cost is bounded by the panel's area.
    let mut run: Option<(i64, i64)> = None;
    for b in bars {
        run = match run {
            Some((x0, x1)) if b.x0 <= x1 => Some((x0, x1.max(b.x1))),
            Some((x0, x1)) => {
                c.fill(bar(x0, x1), colour);
                Some((b.x0, b.x1))
            }
            None => Some((b.x0, b.x1)),
        };
    }
    if let Some((x0, x1)) = run {
        c.fill(bar(x0, x1), colour);
    }
    for b in bars.iter().filter(|b| b.x1 - b.x0 >= EDGE_MIN_BAR_PX) {
        c.fill(bar(b.x0, b.x0 + 1), shade(colour));
    }
    draw_lane_labels(c, l, row, bars, colour);
}

/// Writes each label inside its bar or else beside it, truncated if need be, never over another
/// label or bar.
fn draw_lane_labels(c: &mut Canvas, l: &Layout, row: Rect, bars: &[Bar], colour: Rgb) {
    let (gap, y) = (l.s * 2, l.text_y_in(row));
    let mut free_from = i64::MIN;
    let mut reach = i64::MIN; // rightmost end of the bars before the current one
    for (i, b) in bars.iter().enumerate() {
        let prev_reach = reach;
        reach = reach.max(b.x1);
        if b.label.is_empty() {
            continue;
        }
        let label = to_ascii(&b.label);
        let inside = (b.x0 + gap, b.x1 - gap);
        let beside_x0 = b.x1 + gap;
        let beside = if prev_reach > beside_x0 {
            (0, 0)
        } else {
            (beside_x0, room_after(bars, i, beside_x0, row.x1) - gap)
        };
        let full = text_width(&label, l.s);
        let (x0, x1, ink) = if inside.1 - inside.0 >= full {
            (inside.0, inside.1, contrast_text(colour))
        } else if beside.1 - beside.0 >= full || beside.1 - beside.0 > inside.1 - inside.0 {
            (beside.0, beside.1, TEXT)
        } else {
            (inside.0, inside.1, contrast_text(colour))
        };
        let text = fit(&label, x1 - x0, l.s);
        if x0 < free_from || text.chars().count() < MIN_LABEL_CHARS.min(label.chars().count()) {
            continue;
        }
        let end = c.text(x0, y, &text, l.s, ink);
        free_from = end + gap;
    }
}

/// Where the free room after bar `i` (starting at `x`) ends: the next bar that reaches past `x`,
/// or the panel's edge. Pessimistic (no room) if there are too many bars to look at.
fn room_after(bars: &[Bar], i: usize, x: i64, edge: i64) -> i64 {
    let mut seen = 0;
    for b in bars.iter().skip(i + 1) {
        if b.x1 > x {
            return b.x0.min(edge);
        }
        seen += 1;
        if seen >= LABEL_SCAN_MAX {
            return x;
        }
    }
    edge
}

/// A known lane's colour, else one from the palette.
fn lane_colour(name: &str, i: usize) -> Rgb {
    let lower = name.to_ascii_lowercase();
    LANE_COLOURS.iter().find(|(k, _)| lower.starts_with(k)).map_or(PALETTE[i % PALETTE.len()], |&(_, c)| c)
}

/// White or black, whichever reads better on `bg`.
fn contrast_text(bg: Rgb) -> Rgb {
    let luma = (299 * u32::from(bg[0]) + 587 * u32::from(bg[1]) + 114 * u32::from(bg[2])) / 1000;
    if luma < LIGHT_TEXT_BELOW_LUMA {
        WHITE
    } else {
        BLACK
    }
}

fn shade(c: Rgb) -> Rgb {
    c.map(|v| ((u16::from(v) * EDGE_SHADE) >> 8) as u8)
}

// ---- throughput panel

/// Operations per time bucket, by completion time.
struct Buckets {
    size_s: f64,
    d: f64,
    ok: Vec<u64>,
    bad: Vec<u64>,
}

impl Buckets {
    /// Buckets of 1 s, or of a round coarser size so there is at most one per `PX_PER_BUCKET`
    /// pixels of `plot_w`. The last bucket absorbs the remainder (it is 0.5 to 1.5 buckets long).
    fn count(series: &[Series], d: f64, plot_w: i64) -> Buckets {
        let max = (plot_w / PX_PER_BUCKET).max(1) as f64;
        let size_s = if d / MIN_BUCKET_S <= max { MIN_BUCKET_S } else { nice_time_step(d / max) };
        let n = ((d / size_s).round() as usize).clamp(1, max as usize + 1);
        let mut b = Buckets { size_s, d, ok: vec![0; n], bad: vec![0; n] };
        for sm in series.iter().flat_map(|s| &s.samples) {
            let Some(done) = completion_s(sm, d) else { continue };
            let i = ((done / size_s) as usize).min(n - 1);
            let counts = if sm.outcome == SampleOutcome::Ok { &mut b.ok } else { &mut b.bad };
            counts[i] += 1;
        }
        b
    }

    /// Start and length of bucket `i`, in seconds.
    fn bounds(&self, i: usize) -> (f64, f64) {
        let start = i as f64 * self.size_s;
        let end = if i + 1 == self.ok.len() { self.d } else { start + self.size_s };
        (start, (end - start).max(MIN_DURATION_S))
    }

    fn rates(&self, counts: &[u64]) -> Vec<f64> {
        counts.iter().enumerate().map(|(i, &n)| n as f64 / self.bounds(i).1).collect()
    }
}

/// When a sample completed, if that is known and inside the run.
fn completion_s(sm: &Sample, d: f64) -> Option<f64> {
    let done = sm.at_s + sm.latency_ms.max(0.0) / MS_PER_S;
    (sm.latency_ms.is_finite() && done.is_finite() && (0.0..=d).contains(&done)).then_some(done)
}

/// A linear value axis from 0 to a round top, mapped onto a panel's inner height.
struct LinearAxis {
    top: f64,
    step: f64,
    bottom_px: f64,
    px: f64,
}

impl LinearAxis {
    fn new(peak: f64, r: Rect, s: i64) -> LinearAxis {
        let step = nice_step(peak / Y_TICKS_TARGET);
        let top = ((peak / step).ceil() * step).max(step);
        let inset = PLOT_INSET * s;
        LinearAxis {
            top,
            step,
            bottom_px: (r.y1 - 1 - inset) as f64,
            px: (r.height() - 1 - 2 * inset).max(1) as f64,
        }
    }

    fn y(&self, v: f64) -> i64 {
        (self.bottom_px - v.clamp(0.0, self.top) / self.top * self.px).round() as i64
    }

    fn ticks(&self) -> impl Iterator<Item = f64> + '_ {
        (0..=Y_TICKS_MAX).map(|k| k as f64 * self.step).take_while(|&v| v <= self.top * (1.0 + EPS))
    }
}

fn draw_throughput(c: &mut Canvas, l: &Layout, ax: &TimeAxis, series: &[Series]) {
    let r = l.throughput;
    let b = Buckets::count(series, ax.d, r.width());
    let (ok, bad) = (b.rates(&b.ok), b.rates(&b.bad));
    let y = LinearAxis::new(ok.iter().chain(&bad).fold(0.0, |m, &v| v.max(m)), r, l.s);
    draw_time_grid(c, r, ax);
    for v in y.ticks() {
        let py = y.y(v);
        c.fill(Rect::new(r.x0, py, r.x1, py + 1), GRID);
        draw_y_label(c, l, r, py, &fmt_value(v, y.step));
    }
    c.set_clip(r);
    draw_rate_line(c, l, ax, &b, &bad, &y, BAD_LINE);
    draw_rate_line(c, l, ax, &b, &ok, &y, OK_LINE);
    c.reset_clip();
    let (n_ok, n_bad) = (b.ok.iter().sum::<u64>(), b.bad.iter().sum::<u64>());
    if n_ok + n_bad == 0 {
        draw_empty_note(c, l, r, "no operations");
    }
    c.outline(r, AXIS);
    let header = format!("throughput (ops/s, {} s buckets)", fmt_plain(b.size_s, b.size_s));
    let x = draw_header(c, l, r, &header) + ADVANCE * l.s * 2;
    let items = [
        LegendItem { marker: Marker::Line, colour: OK_LINE, text: format!("ok {n_ok}") },
        LegendItem { marker: Marker::Line, colour: BAD_LINE, text: format!("failed/unknown {n_bad}") },
    ];
    draw_legend(c, l, x, r.x1, l.header_y(r), &items);
}

/// A y label right-aligned against the panel's left edge, centred on `py`.
fn draw_y_label(c: &mut Canvas, l: &Layout, r: Rect, py: i64, label: &str) {
    let x = r.x0 - l.pad - text_width(label, l.s);
    c.text(x.max(0), py - l.line() / 2, label, l.s, TEXT);
}

/// A thick polyline through the bucket centres (a flat line if there is a single bucket).
fn draw_rate_line(
    c: &mut Canvas,
    l: &Layout,
    ax: &TimeAxis,
    b: &Buckets,
    rates: &[f64],
    y: &LinearAxis,
    colour: Rgb,
) {
    let brush = l.s + 1;
    if let [only] = rates {
        let py = y.y(*only);
        c.line((ax.x(0.0), py), (ax.x(ax.d), py), brush, colour);
        return;
    }
    let points: Vec<(i64, i64)> = rates
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (start, len) = b.bounds(i);
            (ax.x(start + len / 2.0), y.y(v))
        })
        .collect();
    for pair in points.windows(2) {
        c.line(pair[0], pair[1], brush, colour);
    }
}

// ---- latency panel

/// A log10 latency axis over whole decades `lo..=hi` (powers of ten of milliseconds).
struct LogAxis {
    lo: i32,
    hi: i32,
    bottom_px: f64,
    px: f64,
}

impl LogAxis {
    fn new((lo, hi): (i32, i32), r: Rect, s: i64) -> LogAxis {
        let inset = PLOT_INSET * s;
        LogAxis {
            lo,
            hi,
            bottom_px: (r.y1 - 1 - inset) as f64,
            px: (r.height() - 1 - 2 * inset).max(1) as f64,
        }
    }

    fn y_log(&self, log: f64) -> i64 {
        let f = (log - f64::from(self.lo)) / f64::from(self.hi - self.lo);
        (self.bottom_px - f.clamp(0.0, 1.0) * self.px).round() as i64
    }

    fn y(&self, ms: f64) -> i64 {
        self.y_log(ms.max(LATENCY_FLOOR_MS).log10())
    }

    /// Decades to label: all of them, or every n-th so labels stay `LOG_TICK_GAP_LINES` apart.
    fn ticks(&self, line: i64) -> impl Iterator<Item = i32> {
        let fit = ((self.px as i64) / (LOG_TICK_GAP_LINES * line)).max(1);
        let stride = (i64::from(self.hi - self.lo) + fit - 1) / fit;
        (self.lo..=self.hi).step_by(usize::try_from(stride.max(1)).unwrap_or(1))
    }
}

/// Whether a sample has a place in the scatter.
fn visible(sm: &Sample, d: f64) -> bool {
    sm.latency_ms.is_finite() && (0.0..=d).contains(&sm.at_s)
}

/// The decades that cover every visible latency (at least one decade).
fn latency_decades(series: &[Series], d: f64) -> (i32, i32) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for sm in series.iter().flat_map(|s| &s.samples).filter(|sm| visible(sm, d)) {
        let v = sm.latency_ms.max(LATENCY_FLOOR_MS);
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return DEFAULT_DECADES;
    }
    let lo = lo.log10().floor() as i32;
    (lo, (hi.log10().ceil() as i32).max(lo + 1))
}

fn draw_latency(c: &mut Canvas, l: &Layout, ax: &TimeAxis, series: &[Series]) {
    let r = l.latency;
    let y = LogAxis::new(latency_decades(series, ax.d), r, l.s);
    draw_time_grid(c, r, ax);
    for k in y.ticks(l.line()) {
        let py = y.y_log(f64::from(k));
        c.fill(Rect::new(r.x0, py, r.x1, py + 1), GRID);
        draw_y_label(c, l, r, py, &fmt_pow10(k));
    }
    c.set_clip(r);
    // Successes first, so the rarer failures stay visible on top.
    let mut drawn = draw_samples(c, l, ax, &y, series, true);
    drawn += draw_samples(c, l, ax, &y, series, false);
    c.reset_clip();
    if drawn == 0 {
        draw_empty_note(c, l, r, "no operations");
    }
    c.outline(r, AXIS);
    let x = draw_header(c, l, r, "latency (ms, log scale)") + ADVANCE * l.s * 2;
    draw_latency_legend(c, l, x, series);
}

/// Draws the samples that succeeded (`ok`) or the others; returns how many.
fn draw_samples(
    c: &mut Canvas,
    l: &Layout,
    ax: &TimeAxis,
    y: &LogAxis,
    series: &[Series],
    ok: bool,
) -> usize {
    let mut n = 0;
    for (i, se) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        for sm in se.samples.iter().filter(|sm| (sm.outcome == SampleOutcome::Ok) == ok && visible(sm, ax.d))
        {
            draw_marker(c, l.s, marker_of(sm.outcome), (ax.x(sm.at_s), y.y(sm.latency_ms)), colour);
            n += 1;
        }
    }
    n
}

fn marker_of(o: SampleOutcome) -> Marker {
    match o {
        SampleOutcome::Ok => Marker::Dot,
        SampleOutcome::Failed => Marker::Cross,
        SampleOutcome::Unknown => Marker::Plus,
    }
}

/// Clients from `x` on, and the marker key at the right.
fn draw_latency_legend(c: &mut Canvas, l: &Layout, x: i64, series: &[Series]) {
    let r = l.latency;
    let key = [
        LegendItem { marker: Marker::Cross, colour: MUTED, text: "failed".into() },
        LegendItem { marker: Marker::Plus, colour: MUTED, text: "unknown".into() },
    ];
    let key_w: i64 = key.iter().map(|it| it.width(l.s) + legend_gap(l.s)).sum();
    let key_x = r.x1 - key_w + legend_gap(l.s);
    let y = l.header_y(r);
    let clients_end = if key_x >= x {
        draw_legend(c, l, key_x, r.x1, y, &key);
        key_x - legend_gap(l.s)
    } else {
        r.x1
    };
    let clients: Vec<LegendItem> = series
        .iter()
        .enumerate()
        .map(|(i, se)| LegendItem {
            marker: Marker::Dot,
            colour: PALETTE[i % PALETTE.len()],
            text: fit(&to_ascii(&se.client), LEGEND_NAME_MAX_CHARS as i64 * ADVANCE * l.s, l.s),
        })
        .collect();
    draw_legend(c, l, x, clients_end, y, &clients);
}

// ---- legend and markers

#[derive(Clone, Copy)]
enum Marker {
    Dot,
    Cross,
    Plus,
    Line,
}

struct LegendItem {
    marker: Marker,
    colour: Rgb,
    text: String,
}

impl LegendItem {
    fn width(&self, s: i64) -> i64 {
        SWATCH_W * s + s * 2 + text_width(&self.text, s)
    }
}

fn legend_gap(s: i64) -> i64 {
    ADVANCE * s * 2
}

/// Draws items left to right from `x`, ending with "+N" (the number left out) when they do not
/// all fit before `limit`; returns where the next item would start.
fn draw_legend(c: &mut Canvas, l: &Layout, x: i64, limit: i64, y: i64, items: &[LegendItem]) -> i64 {
    let (s, gap) = (l.s, legend_gap(l.s));
    let mut x = x;
    for (i, it) in items.iter().enumerate() {
        let left = items.len() - i - 1;
        let reserve = if left > 0 { gap + text_width(&format!("+{left}"), s) } else { 0 };
        if x + it.width(s) + reserve > limit {
            let more = format!("+{}", items.len() - i);
            if x + text_width(&more, s) <= limit {
                c.text(x, y, &more, s, MUTED);
            }
            return x;
        }
        let centre = (x + SWATCH_W * s / 2, y + l.line() / 2);
        draw_marker(c, s, it.marker, centre, it.colour);
        c.text(x + SWATCH_W * s + s * 2, y, &it.text, s, TEXT);
        x += it.width(s) + gap;
    }
    x
}

/// A marker centred on `(x, y)`: a dot, a diagonal cross, an upright cross or a short line.
fn draw_marker(c: &mut Canvas, s: i64, m: Marker, (x, y): (i64, i64), colour: Rgb) {
    let r = MARKER_R * s;
    let px = |x: i64, y: i64| Rect::new(x, y, x + s, y + s);
    match m {
        Marker::Dot => c.fill(Rect::new(x - s, y - s, x + s + 1, y + s + 1), colour),
        Marker::Cross => {
            for i in (-r..=r).step_by(usize::try_from(s).unwrap_or(1)) {
                c.fill(px(x + i, y + i), colour);
                c.fill(px(x + i, y - i), colour);
            }
        }
        Marker::Plus => {
            c.fill(Rect::new(x - r, y, x + r + 1, y + s), colour);
            c.fill(Rect::new(x, y - r, x + s, y + r + 1), colour);
        }
        Marker::Line => c.fill(
            Rect::new(x - SWATCH_W * s / 2, y - s / 2, x + SWATCH_W * s / 2, y - s / 2 + s + 1),
            colour,
        ),
    }
}

// ------------------------------------------------------------------------------------------------
// Canvas and text

/// A rectangle of pixels `x0..x1` by `y0..y1` (empty when reversed).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rect {
    x0: i64,
    y0: i64,
    x1: i64,
    y1: i64,
}

impl Rect {
    fn new(x0: i64, y0: i64, x1: i64, y1: i64) -> Rect {
        Rect { x0, y0, x1, y1 }
    }

    fn intersect(self, o: Rect) -> Rect {
        Rect::new(self.x0.max(o.x0), self.y0.max(o.y0), self.x1.min(o.x1), self.y1.min(o.y1))
    }

    fn width(self) -> i64 {
        self.x1 - self.x0
    }

    fn height(self) -> i64 {
        self.y1 - self.y0
    }
}

/// RGB pixels, row-major, white to start with. Every write is clipped to `clip`, which is always
/// inside the image.
struct Canvas {
    w: i64,
    h: i64,
    px: Vec<u8>,
    clip: Rect,
}

impl Canvas {
    fn new(w: u32, h: u32) -> Canvas {
        let (w, h) = (i64::from(w), i64::from(h));
        let len = usize::try_from(w * h).unwrap_or(0) * BYTES_PER_PIXEL;
        Canvas { w, h, px: vec![0xFF; len], clip: Rect::new(0, 0, w, h) }
    }

    fn set_clip(&mut self, r: Rect) {
        self.clip = r.intersect(Rect::new(0, 0, self.w, self.h));
    }

    fn reset_clip(&mut self) {
        self.clip = Rect::new(0, 0, self.w, self.h);
    }

    fn fill(&mut self, r: Rect, colour: Rgb) {
        let r = r.intersect(self.clip);
        for y in r.y0..r.y1 {
            for x in r.x0..r.x1 {
                // In bounds: the clip lies inside the image.
                let i = (y * self.w + x) as usize * BYTES_PER_PIXEL;
                self.px[i..i + BYTES_PER_PIXEL].copy_from_slice(&colour);
            }
        }
    }

    fn outline(&mut self, r: Rect, colour: Rgb) {
        self.fill(Rect::new(r.x0, r.y0, r.x1, r.y0 + 1), colour);
        self.fill(Rect::new(r.x0, r.y1 - 1, r.x1, r.y1), colour);
        self.fill(Rect::new(r.x0, r.y0, r.x0 + 1, r.y1), colour);
        self.fill(Rect::new(r.x1 - 1, r.y0, r.x1, r.y1), colour);
    }

    /// A line of `brush` x `brush` squares (Bresenham); ends are clamped near the image first.
    fn line(&mut self, a: (i64, i64), b: (i64, i64), brush: i64, colour: Rgb) {
        let clamp = |(x, y): (i64, i64)| (x.clamp(-1, self.w), y.clamp(-1, self.h));
        let ((mut x, mut y), (x1, y1)) = (clamp(a), clamp(b));
        let (dx, dy) = ((x1 - x).abs(), -(y1 - y).abs());
        let (sx, sy) = (if x < x1 { 1 } else { -1 }, if y < y1 { 1 } else { -1 });
        let (mut err, off) = (dx + dy, brush / 2);
        loop {
            self.fill(Rect::new(x - off, y - off, x - off + brush, y - off + brush), colour);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Writes `s` with its top-left corner at `(x, y)`; returns the x after the last character.
    fn text(&mut self, x: i64, y: i64, s: &str, scale: i64, colour: Rgb) -> i64 {
        let mut cx = x;
        for ch in s.chars() {
            if cx >= self.w {
                break;
            }
            self.glyph(cx, y, ch, scale, colour);
            cx += ADVANCE * scale;
        }
        cx - scale
    }

    fn glyph(&mut self, x: i64, y: i64, ch: char, scale: i64, colour: Rgb) {
        let bits = glyph_bits(ch);
        for col in 0..GLYPH_W {
            let column = (bits >> (8 * (GLYPH_W - 1 - col))) & 0xFF;
            for row in 0..GLYPH_ROWS {
                if (column >> row) & 1 == 1 {
                    let (gx, gy) = (x + col as i64 * scale, y + row * scale);
                    self.fill(Rect::new(gx, gy, gx + scale, gy + scale), colour);
                }
            }
        }
    }
}

/// The packed glyph of `ch` ('?' for characters outside the font).
fn glyph_bits(ch: char) -> u64 {
    let code = u32::from(ch);
    let code = if (FIRST_CHAR..=LAST_CHAR).contains(&code) { code } else { FALLBACK_CHAR };
    FONT[(code - FIRST_CHAR) as usize]
}

/// Width in pixels of `s` drawn at `scale` (no trailing space).
fn text_width(s: &str, scale: i64) -> i64 {
    let n = i64::try_from(s.chars().count()).unwrap_or(i64::MAX / ADVANCE);
    (n * ADVANCE - 1).max(0) * scale
}

/// `s`, cut to fit `max_px` at `scale` with ".." marking the cut.
fn fit(s: &str, max_px: i64, scale: i64) -> String {
    let max_chars = usize::try_from((max_px / scale + 1) / ADVANCE).unwrap_or(0);
    if s.chars().nth(max_chars).is_none() {
        return s.to_string();
    }
    if max_chars <= ELLIPSIS.len() {
        return s.chars().take(max_chars).collect();
    }
    let mut out: String = s.chars().take(max_chars - ELLIPSIS.len()).collect();
    out.push_str(ELLIPSIS);
    out
}

/// `s` with common non-ASCII symbols spelled in ASCII (the rest is drawn as '?').
fn to_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match TRANSLITERATIONS.iter().find(|(c, _)| *c == ch) {
            Some((_, ascii)) => out.push_str(ascii),
            None => out.push(ch),
        }
    }
    out
}

// ------------------------------------------------------------------------------------------------
// PNG

/// Encodes raw RGB pixels (row-major, 3 bytes per pixel) as a PNG.
///
/// Uses filter 0 on every row and stored (uncompressed) deflate blocks, split over IDAT chunks of
/// at most 1 MiB. Missing pixels (`rgb` shorter than `width * height * 3`) are black; extra bytes
/// are ignored.
pub fn encode_png(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let z = zlib_stored(&scanlines(width, height, rgb));
    let mut out = Vec::with_capacity(z.len() + z.len() / IDAT_MAX * 12 + 64);
    out.extend_from_slice(&PNG_SIGNATURE);
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&IHDR_TAIL);
    write_chunk(&mut out, b"IHDR", &ihdr);
    for part in z.chunks(IDAT_MAX) {
        write_chunk(&mut out, b"IDAT", part);
    }
    write_chunk(&mut out, b"IEND", &[]);
    out
}

/// The image as PNG scanlines: a filter byte, then the row's pixels.
fn scanlines(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let row = (width as usize).saturating_mul(BYTES_PER_PIXEL);
    let total = row.saturating_add(1).saturating_mul(height as usize);
    let mut raw = Vec::with_capacity(total.min(RESERVE_MAX));
    for y in 0..height as usize {
        raw.push(FILTER_NONE);
        let have = rgb.get(y.saturating_mul(row)..).unwrap_or(&[]);
        let take = have.len().min(row);
        raw.extend_from_slice(&have[..take]);
        raw.resize(raw.len() + (row - take), 0);
    }
    raw
}

/// A zlib stream of stored deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut z = Vec::with_capacity(data.len() + (data.len() / STORED_BLOCK_MAX + 1) * 5 + 6);
    z.extend_from_slice(&ZLIB_HEADER);
    let mut blocks = data.chunks(STORED_BLOCK_MAX).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xFF, 0xFF]); // one empty final block
    }
    while let Some(block) = blocks.next() {
        z.push(u8::from(blocks.peek().is_none())); // BFINAL, BTYPE = 00 (stored)
        let len = u16::try_from(block.len()).unwrap_or(u16::MAX); // chunks are at most 0xFFFF
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&adler32(data).to_be_bytes());
    z
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(ADLER_NMAX) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= ADLER_MOD;
        b %= ADLER_MOD;
    }
    (b << 16) | a
}

/// Appends a chunk: length, type, data, CRC-32 of type and data.
fn write_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX); // callers pass at most IDAT_MAX
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&[kind, data]).to_be_bytes());
}

fn crc32(parts: &[&[u8]]) -> u32 {
    let mut c = !0u32;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { CRC_POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoded PNG.
    struct Decoded {
        width: u32,
        height: u32,
        rgb: Vec<u8>,
    }

    fn crc_bitwise(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        !c
    }

    fn adler_naive(bytes: &[u8]) -> u32 {
        let (mut a, mut b) = (1u32, 0u32);
        for &x in bytes {
            a = (a + u32::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        (b << 16) | a
    }

    fn be32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The chunks of a PNG, checking the signature and every CRC.
    fn chunks(png: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
        assert_eq!(&png[..8], &PNG_SIGNATURE);
        let mut out = Vec::new();
        let mut p = 8;
        while p < png.len() {
            let len = be32(&png[p..]) as usize;
            let kind: [u8; 4] = png[p + 4..p + 8].try_into().unwrap();
            let data = &png[p + 8..p + 8 + len];
            let crc = be32(&png[p + 8 + len..]);
            assert_eq!(
                crc,
                crc_bitwise(&png[p + 4..p + 8 + len]),
                "CRC of {}",
                String::from_utf8_lossy(&kind)
            );
            out.push((kind, data.to_vec()));
            p += 12 + len;
        }
        assert_eq!(p, png.len());
        out
    }

    /// Inflates a zlib stream of stored blocks, checking the header, LEN/NLEN and Adler-32.
    fn inflate_stored(z: &[u8]) -> Vec<u8> {
        assert_eq!(((u16::from(z[0]) << 8) | u16::from(z[1])) % 31, 0, "zlib header check");
        assert_eq!(z[0] & 0x0F, 8, "deflate");
        let mut out = Vec::new();
        let mut p = 2;
        loop {
            let head = z[p];
            assert_eq!(head >> 1, 0, "stored block");
            let len = u16::from_le_bytes([z[p + 1], z[p + 2]]);
            let nlen = u16::from_le_bytes([z[p + 3], z[p + 4]]);
            assert_eq!(len, !nlen);
            out.extend_from_slice(&z[p + 5..p + 5 + len as usize]);
            p += 5 + len as usize;
            if head & 1 == 1 {
                break;
            }
        }
        assert_eq!(be32(&z[p..]), adler_naive(&out), "Adler-32");
        assert_eq!(p + 4, z.len());
        out
    }

    fn decode(png: &[u8]) -> Decoded {
        let cs = chunks(png);
        assert_eq!(&cs[0].0, b"IHDR");
        assert_eq!(&cs.last().unwrap().0, b"IEND");
        let ihdr = &cs[0].1;
        assert_eq!(&ihdr[8..], &IHDR_TAIL);
        let (width, height) = (be32(&ihdr[0..]), be32(&ihdr[4..]));
        let z: Vec<u8> = cs.iter().filter(|(k, _)| k == b"IDAT").flat_map(|(_, d)| d.clone()).collect();
        let raw = inflate_stored(&z);
        let row = width as usize * 3;
        assert_eq!(raw.len(), (row + 1) * height as usize);
        let mut rgb = Vec::with_capacity(row * height as usize);
        for line in raw.chunks(row + 1) {
            assert_eq!(line[0], FILTER_NONE);
            rgb.extend_from_slice(&line[1..]);
        }
        Decoded { width, height, rgb }
    }

    fn pixel(d: &Decoded, x: i64, y: i64) -> Rgb {
        let i = (y as usize * d.width as usize + x as usize) * 3;
        [d.rgb[i], d.rgb[i + 1], d.rgb[i + 2]]
    }

    fn count_in(d: &Decoded, r: Rect, colour: Rgb) -> usize {
        (r.y0..r.y1)
            .flat_map(|y| (r.x0..r.x1).map(move |x| (x, y)))
            .filter(|&(x, y)| pixel(d, x, y) == colour)
            .count()
    }

    /// A deterministic xorshift generator in 0..1.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    fn span(start_s: f64, end_s: f64, lane: &str, label: &str) -> Span {
        Span { start_s, end_s, lane: lane.into(), label: label.into() }
    }

    /// A 120 s run with every kind of fault and 5 clients.
    fn sample_timeline() -> Timeline {
        let spans = vec![
            span(12.0, 30.0, "partition", "split [0] | [1, 2]"),
            span(70.0, 74.0, "partition", "one-way loss 2 -> 0"),
            span(40.0, 40.0, "kill", "kill -9 nodes [1]"),
            span(85.0, 85.0, "kill", "kill -9 nodes [0, 2]"),
            span(50.0, 56.0, "pause", "SIGSTOP node 2"),
            span(60.0, 61.0, "clock", "node 1 +30 s"),
            span(90.0, 105.0, "disk", "node 0 disk full"),
            span(20.0, 45.0, "network", "slow link of node 2: delay 80±40 ms, 2% loss, 10% reordered"),
            span(100.0, 118.0, "network", "drop 300‰ of packets into node 1"),
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let series = (0..5)
            .map(|c| {
                let mut samples = Vec::new();
                let mut t = rng.next() * 0.1;
                while t < 120.0 {
                    let in_partition = (12.0..30.0).contains(&t) && c < 2;
                    let killed = (40.0..43.0).contains(&t) || (85.0..88.0).contains(&t);
                    let paused = (50.0..56.0).contains(&t);
                    let base = 0.5 + 3.0 * rng.next() * rng.next() * 10.0;
                    let (latency_ms, outcome) = if in_partition && rng.next() < 0.7 {
                        (5000.0, SampleOutcome::Unknown)
                    } else if killed {
                        (base * 4.0, SampleOutcome::Failed)
                    } else if paused {
                        ((56.0 - t) * 1000.0 + base, SampleOutcome::Ok)
                    } else if rng.next() < 0.005 {
                        (base * 20.0, SampleOutcome::Failed)
                    } else {
                        (base, SampleOutcome::Ok)
                    };
                    samples.push(Sample { at_s: t, latency_ms, outcome });
                    t += latency_ms / 1000.0 + 0.02 + 0.03 * rng.next();
                }
                Series { client: if c == 4 { "final reads".into() } else { format!("client {c}") }, samples }
            })
            .collect();
        Timeline { title: "annal-netns seed 42 on 3 nodes".into(), duration_s: 120.0, spans, series }
    }

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
        assert_eq!(crc32(&[b"IEND"]), 0xAE42_6082);
        assert_eq!(crc32(&[b"1234", b"56789"]), crc_bitwise(b"123456789"));
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        let long: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
        assert_eq!(adler32(&long), adler_naive(&long));
        assert_eq!(adler32(&[]), 1);
    }

    #[test]
    fn encoder_round_trips_pixels() {
        let (w, h) = (7u32, 5u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
        let png = encode_png(w, h, &rgb);
        let d = decode(&png);
        assert_eq!((d.width, d.height), (w, h));
        assert_eq!(d.rgb, rgb);
    }

    #[test]
    fn encoder_splits_blocks_and_chunks() {
        let (w, h) = (700u32, 600u32); // 1.26 MB of scanlines: 20 blocks, 2 IDAT chunks
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i % 253) as u8).collect();
        let png = encode_png(w, h, &rgb);
        let idats = chunks(&png).iter().filter(|(k, _)| k == b"IDAT").count();
        assert_eq!(idats, 2);
        assert_eq!(decode(&png).rgb, rgb);
    }

    #[test]
    fn encoder_pads_short_input_and_accepts_empty_images() {
        let d = decode(&encode_png(3, 2, &[9, 9, 9, 8]));
        assert_eq!(d.rgb, [vec![9, 9, 9, 8], vec![0; 14]].concat());
        let d = decode(&encode_png(0, 0, &[]));
        assert!(d.rgb.is_empty());
        let d = decode(&encode_png(2, 1, &[1; 100]));
        assert_eq!(d.rgb, vec![1; 6]);
    }

    #[test]
    fn render_has_the_requested_size_and_draws_every_panel() {
        let t = sample_timeline();
        let (w, h) = (1400u32, 820u32);
        let d = decode(&render(&t, w, h));
        assert_eq!((d.width, d.height), (w, h));
        assert_eq!(pixel(&d, 0, 0), WHITE);
        let lanes = Lanes::collect(&t.spans);
        let l = Layout::new(i64::from(w), i64::from(h), &lanes.names);
        assert_eq!(l.lanes_shown, 6);
        assert!(count_in(&d, l.faults, ORANGE) > 100, "partition bars");
        assert!(count_in(&d, l.faults, RED) > 10, "kill bars");
        assert!(count_in(&d, l.throughput, OK_LINE) > 100, "ok throughput");
        assert!(count_in(&d, l.throughput, BAD_LINE) > 100, "failed throughput");
        for (i, colour) in PALETTE.iter().take(5).enumerate() {
            assert!(count_in(&d, l.latency, *colour) > 100, "client {i}");
        }
        assert!(
            l.faults.y1 < l.throughput.y0 && l.throughput.y1 < l.latency.y0 && l.latency.y1 < i64::from(h)
        );
    }

    #[test]
    fn render_clamps_the_size() {
        for (w, h, want) in [
            (0, 0, (MIN_WIDTH, MIN_HEIGHT)),
            (100, 5000, (MIN_WIDTH, 5000)),
            (u32::MAX, 300, (MAX_SIDE, 300)),
            (330, u32::MAX, (330, MAX_SIDE)),
        ] {
            let d = decode(&render(&sample_timeline(), w, h));
            assert_eq!((d.width, d.height), want);
        }
    }

    #[test]
    fn render_survives_degenerate_durations() {
        let t = sample_timeline();
        for duration_s in
            [0.0, -5.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-300, 0.3, 1e300, f64::MAX]
        {
            let t = Timeline { duration_s, ..t.clone() };
            let d = decode(&render(&t, 640, 480));
            assert_eq!((d.width, d.height), (640, 480));
        }
        let empty = decode(&render(&Timeline::default(), 640, 480));
        assert_eq!((empty.width, empty.height), (640, 480));
    }

    #[test]
    fn render_survives_bad_values() {
        let odd = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1e-300, 5.0, 1e300, f64::MAX, -0.0];
        let mut spans = Vec::new();
        let mut samples = Vec::new();
        for &a in &odd {
            for &b in &odd {
                spans.push(span(a, b, "weird", "a label that is rather long"));
                samples.push(Sample { at_s: a, latency_ms: b, outcome: SampleOutcome::Unknown });
                samples.push(Sample { at_s: b, latency_ms: a, outcome: SampleOutcome::Ok });
            }
        }
        let series = vec![Series { client: "x".into(), samples }];
        let t = Timeline { title: "bad".into(), duration_s: 10.0, spans, series };
        for (w, h) in [(320, 240), (1600, 1000)] {
            assert_eq!(decode(&render(&t, w, h)).width, w);
        }
    }

    #[test]
    fn render_survives_many_lanes_clients_and_odd_text() {
        let long = "ü→€😀".repeat(2_000);
        let spans: Vec<Span> = (0..500)
            .map(|i| span(f64::from(i) * 0.1, f64::from(i) * 0.1 + 3.0, &format!("lane {i} {long}"), &long))
            .collect();
        let series: Vec<Series> = (0..300)
            .map(|i| Series {
                client: format!("{long}{i}"),
                samples: vec![Sample {
                    at_s: f64::from(i) * 0.1,
                    latency_ms: 3.0,
                    outcome: SampleOutcome::Failed,
                }],
            })
            .collect();
        let t = Timeline { title: long.clone(), duration_s: 30.0, spans, series };
        assert_eq!(decode(&render(&t, 320, 240)).width, 320);
        assert_eq!(decode(&render(&t, 1400, 820)).width, 1400);
        // One lane crowded with identical spans.
        let same: Vec<Span> = (0..100_000).map(|_| span(1.0, 2.0, "kill", "same")).collect();
        let t = Timeline { spans: same, duration_s: 10.0, ..Timeline::default() };
        assert_eq!(decode(&render(&t, 800, 600)).width, 800);
    }

    #[test]
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)] // a timing test, not node code
    fn render_of_a_million_samples_is_quick() {
        let mut rng = Rng(7);
        let series: Vec<Series> = (0..8)
            .map(|c| Series {
                client: format!("client {c}"),
                samples: (0..125_000)
                    .map(|_| Sample {
                        at_s: rng.next() * 600.0,
                        latency_ms: 10f64.powf(rng.next() * 4.0 - 1.0),
                        outcome: if rng.next() < 0.05 { SampleOutcome::Failed } else { SampleOutcome::Ok },
                    })
                    .collect(),
            })
            .collect();
        let t = Timeline { title: "a million".into(), duration_s: 600.0, spans: Vec::new(), series };
        let start = std::time::Instant::now();
        let png = render(&t, 1400, 820);
        let took = start.elapsed();
        eprintln!("rendered 1e6 samples in {took:?}");
        assert!(png.len() > 1400 * 820 * 3);
        if !cfg!(debug_assertions) {
            assert!(took < std::time::Duration::from_secs(1), "took {took:?}");
        }
    }

    #[test]
    fn time_ticks_are_round_and_between_5_and_12() {
        let mut d = MIN_DURATION_S;
        while d < MAX_DURATION_S {
            let step = tick_step(d);
            let n = (d / step * (1.0 + EPS)).floor() as usize + 1;
            assert!((5..=12).contains(&n), "{n} ticks of {step} s over {d} s");
            d *= 1.37;
        }
        assert_eq!(tick_step(60.0), 10.0);
        assert_eq!(tick_step(120.0), 20.0);
        assert_eq!(tick_step(600.0), 60.0);
        assert_eq!(tick_step(3600.0), 600.0);
        assert_eq!(tick_step(1.0), 0.1);
    }

    #[test]
    fn time_axis_keeps_labels_apart_on_narrow_plots() {
        let plot = Rect::new(40, 0, 300, 10);
        let ax = TimeAxis::new(1e8, plot, 1);
        let xs: Vec<i64> = ax.ticks().map(|t| ax.x(t)).collect();
        for pair in xs.windows(2) {
            assert!(pair[1] - pair[0] >= text_width(&fmt_plain(1e8, ax.step), 1), "{xs:?}");
        }
        assert!(!xs.is_empty());
    }

    #[test]
    fn labels_are_formatted_roundly() {
        assert_eq!(fmt_plain(0.30000000000000004, 0.1), "0.3");
        assert_eq!(fmt_plain(120.0, 20.0), "120");
        assert_eq!(fmt_value(4000.0, 2000.0), "4k");
        assert_eq!(fmt_value(2500.0, 500.0), "2500");
        assert_eq!(fmt_value(0.75, 0.05), "0.75");
        let decades: Vec<String> = (-1..=6).map(fmt_pow10).collect();
        assert_eq!(decades, ["0.1", "1", "10", "100", "1000", "10000", "1e5", "1e6"]);
    }

    #[test]
    fn throughput_buckets_fit_the_width() {
        for d in [0.5, 1.0, 59.0, 600.0, 86_400.0, 1e9] {
            let b = Buckets::count(&[], d, 400);
            assert!(b.ok.len() <= 101, "{} buckets over {d} s", b.ok.len());
            assert!(b.size_s >= 1.0);
            let total: f64 = (0..b.ok.len()).map(|i| b.bounds(i).1).sum();
            assert!((total - d).abs() < 1e-6 * d.max(1.0), "buckets cover {total} of {d}");
        }
        let s = Series {
            client: "c".into(),
            samples: vec![
                Sample { at_s: 0.5, latency_ms: 200.0, outcome: SampleOutcome::Ok },
                Sample { at_s: 0.5, latency_ms: 900.0, outcome: SampleOutcome::Unknown },
                Sample { at_s: 9.9, latency_ms: 500.0, outcome: SampleOutcome::Ok }, // completes after the end
            ],
        };
        let b = Buckets::count(&[s], 10.0, 1000);
        assert_eq!(b.ok, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b.bad, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn latency_decades_cover_the_data() {
        let series = |lat: &[f64]| {
            vec![Series {
                client: "c".into(),
                samples: lat
                    .iter()
                    .map(|&l| Sample { at_s: 1.0, latency_ms: l, outcome: SampleOutcome::Ok })
                    .collect(),
            }]
        };
        assert_eq!(latency_decades(&[], 10.0), DEFAULT_DECADES);
        assert_eq!(latency_decades(&series(&[3.0, 40.0]), 10.0), (0, 2));
        assert_eq!(latency_decades(&series(&[0.0, -3.0, 5.0]), 10.0), (-1, 1));
        assert_eq!(latency_decades(&series(&[7.0]), 10.0), (0, 1));
        assert_eq!(latency_decades(&series(&[f64::NAN, 5000.0]), 10.0), (3, 4));
    }

    #[test]
    fn font_covers_printable_ascii() {
        assert_eq!(glyph_bits(' '), 0);
        for code in FIRST_CHAR + 1..=LAST_CHAR {
            let ch = char::from_u32(code).unwrap();
            assert_ne!(glyph_bits(ch), 0, "{ch:?} is blank");
            assert_eq!(glyph_bits(ch) >> 40, 0, "{ch:?} has more than 5 columns");
            let descends = (0..5).any(|col| (glyph_bits(ch) >> (8 * col)) & 0x80 != 0);
            assert_eq!(descends, "gjpqy".contains(ch), "{ch:?} descender");
        }
        assert_eq!(glyph_bits('é'), glyph_bits('?'));
        assert_eq!(to_ascii("80±40 ms, 3‰"), "80+-40 ms, 3o/oo");
        assert_eq!(fit("partition", 6 * 6 - 1, 1), "part..");
        assert_eq!(fit("kill", 6 * 6 - 1, 1), "kill");
        assert_eq!(text_width("abc", 2), 34);
    }

    /// With `PLOT_SAMPLE_DIR` set, writes sample*.png and font.png there, to look at.
    #[test]
    #[allow(clippy::disallowed_methods)] // pictures to look at, not node code
    fn writes_sample_pictures_when_asked() {
        let Some(dir) = std::env::var_os("PLOT_SAMPLE_DIR") else { return };
        let dir = std::path::PathBuf::from(dir);
        let t = sample_timeline();
        std::fs::write(dir.join("sample.png"), render(&t, 1400, 820)).unwrap();
        std::fs::write(dir.join("sample-small.png"), render(&t, 320, 240)).unwrap();
        std::fs::write(dir.join("sample-empty.png"), render(&Timeline::default(), 640, 400)).unwrap();
        let mut long = t.clone();
        long.duration_s *= 30.0;
        long.spans.iter_mut().for_each(|sp| (sp.start_s, sp.end_s) = (sp.start_s * 30.0, sp.end_s * 30.0));
        long.series.iter_mut().flat_map(|se| &mut se.samples).for_each(|sm| sm.at_s *= 30.0);
        std::fs::write(dir.join("sample-long.png"), render(&long, 1000, 600)).unwrap();
        let mut c = Canvas::new(640, 60);
        let chars: String = (FIRST_CHAR..=LAST_CHAR).filter_map(char::from_u32).collect();
        for (i, part) in chars.as_bytes().chunks(48).enumerate() {
            c.text(4, 4 + i as i64 * 18, std::str::from_utf8(part).unwrap(), 2, TEXT);
        }
        std::fs::write(dir.join("font.png"), encode_png(640, 60, &c.px)).unwrap();
    }
}
