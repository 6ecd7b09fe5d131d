//! Timeline pictures of fault-injection runs, rendered to PNG with `std` only.
//!
//! One image, three panels over a shared time axis (seconds since the start of the run): the
//! faults as bars, one row per lane; client throughput per time bucket (counted at completion);
//! and a log-scale latency scatter, one colour per client. This module owns the layout, a 5x7
//! bitmap font for printable ASCII and a small PNG encoder (Sub/Up row filters, deflate with the
//! fixed Huffman codes over greedy LZ77 matches: a chart of flat colours shrinks ~40x).
//!
//! Invariants: [`render`] never panics and its cost is linear in the number of spans and samples
//! (plus a sort of the spans): non-finite values are skipped, whatever lies outside
//! `0..=duration_s` is clipped, a duration that is not positive and finite counts as 1 s, and the
//! size is clamped to `320x240..=8192x8192`. [`encode_png`] always emits a complete PNG
//! (signature, IHDR, IDAT, IEND) with valid CRCs and a valid zlib stream, in time linear in the
//! pixels; blocks that would not shrink are stored, so noise costs ~0.01% more than raw.

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
/// Row filters tried (PNG filter method 0): the byte itself, minus the byte one pixel to the
/// left, minus the byte above. The one with the smallest sum of absolute (signed) values is kept.
const FILTER_NONE: u8 = 0;
const FILTER_SUB: u8 = 1;
const FILTER_UP: u8 = 2;
/// zlib header: deflate with a 32 KiB window, no dictionary, "fast" ((0x78 << 8 | 0x5E) % 31 == 0).
const ZLIB_HEADER: [u8; 2] = [0x78, 0x5E];
/// Longest stored deflate block.
const STORED_BLOCK_MAX: usize = 0xFFFF;
/// Input bytes per deflate block, so that with a match running past its end it still fits one
/// stored block: each block is written with the fixed Huffman codes or stored, whichever is
/// shorter, so noise costs under 0.01% more than raw.
const BLOCK_INPUT: usize = STORED_BLOCK_MAX - MAX_MATCH + 1;
/// Block types (BTYPE) and the end-of-block symbol.
const BTYPE_STORED: u32 = 0;
const BTYPE_FIXED: u32 = 1;
const END_OF_BLOCK: usize = 256;
/// Bits of a block header (BFINAL, BTYPE).
const BLOCK_HEADER_BITS: u64 = 3;
/// Bits of a stored block beyond its bytes: header, at most 7 bits of padding, LEN and NLEN.
const STORED_OVERHEAD_BITS: u64 = BLOCK_HEADER_BITS + 7 + 32;
/// The fixed literal/length code (RFC 1951, 3.2.6), bit-reversed for LSB-first output.
const FIXED_LITLEN: [(u16, u8); 288] = fixed_litlen_codes();
/// Fixed distance codes are 5 bits wide.
const FIXED_DIST_BITS: u32 = 5;
/// LZ77: matches of 3..=258 bytes, at most 32 KiB back.
const MIN_MATCH: usize = 3;
const MAX_MATCH: usize = 258;
const WINDOW: usize = 1 << 15;
/// Hash of the next 3 bytes -> most recent position; older positions are chained per window slot.
const HASH_BITS: u32 = 16;
const HASH_MUL: u32 = 0x9E37_79B1;
/// Candidates tried per position (greedy: the longest wins, no lazy matching).
const MAX_CHAIN: usize = 32;
/// After `2^SKIP_SHIFT` searches in a row without a match only every second position is searched,
/// after twice as many every third, and so on: noise goes 10x faster, charts are unaffected.
const SKIP_SHIFT: u32 = 6;
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
    encode_png(w, h, &paint(t, w, h).px)
}

/// Draws `t` on a canvas of `w` x `h` pixels (already clamped).
fn paint(t: &Timeline, w: u32, h: u32) -> Canvas {
    let mut c = Canvas::new(w, h);
    let lanes = Lanes::collect(&t.spans);
    let l = Layout::new(c.w, c.h, &lanes.names);
    let ax = TimeAxis::new(run_duration(t.duration_s), l.faults, l.s);
    draw_title(&mut c, &l, &t.title);
    draw_faults(&mut c, &l, &ax, &lanes, &t.spans);
    draw_throughput(&mut c, &l, &ax, &t.series);
    draw_latency(&mut c, &l, &ax, &t.series);
    draw_time_axis(&mut c, &l, &ax);
    c
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
/// Each row gets the filter (None, Sub or Up) whose output has the smallest sum of absolute
/// values; the rows are deflated with the fixed Huffman codes over greedy LZ77 matches (blocks
/// that would not shrink are stored) and split over IDAT chunks of at most 1 MiB. Missing pixels
/// (`rgb` shorter than `width * height * 3`) are black; extra bytes are ignored.
pub fn encode_png(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let z = zlib(&scanlines(width, height, rgb));
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

/// The image as PNG scanlines: a filter byte, then the row's filtered pixels.
fn scanlines(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let row = (width as usize).saturating_mul(BYTES_PER_PIXEL);
    let total = row.saturating_add(1).saturating_mul(height as usize);
    let mut raw = Vec::with_capacity(total.min(RESERVE_MAX));
    let (mut above, mut cur) = (Vec::new(), Vec::new());
    for y in 0..height as usize {
        let have = rgb.get(y.saturating_mul(row)..).unwrap_or(&[]);
        cur.clear();
        cur.extend_from_slice(&have[..have.len().min(row)]);
        cur.resize(row, 0);
        above.resize(row, 0); // zeros above the first row
        let (first, rest) = cur.split_at(BYTES_PER_PIXEL.min(row));
        let sums = [
            (FILTER_NONE, abs_sum(cur.iter().copied())),
            (FILTER_SUB, abs_sum(first.iter().copied()) + abs_sum(diff(rest, &cur))),
            (FILTER_UP, abs_sum(diff(&cur, &above))),
        ];
        // The first of equal sums wins: None, then Sub, then Up.
        let filter = sums.into_iter().min_by_key(|&(_, sum)| sum).map_or(FILTER_NONE, |(f, _)| f);
        raw.push(filter);
        match filter {
            FILTER_SUB => {
                raw.extend_from_slice(first);
                raw.extend(diff(rest, &cur));
            }
            FILTER_UP => raw.extend(diff(&cur, &above)),
            _ => raw.extend_from_slice(&cur),
        }
        std::mem::swap(&mut above, &mut cur);
    }
    raw
}

/// `row[i] - base[i]` (wrapping) for each byte of `row` (`base` is at least as long).
fn diff<'a>(row: &'a [u8], base: &'a [u8]) -> impl Iterator<Item = u8> + 'a {
    row.iter().zip(base).map(|(b, a)| b.wrapping_sub(*a))
}

/// The sum of the absolute values of `bytes` read as signed.
fn abs_sum(bytes: impl Iterator<Item = u8>) -> u64 {
    bytes.map(|b| u64::from((b as i8).unsigned_abs())).sum()
}

/// A zlib stream: deflate blocks (fixed Huffman codes over LZ77 matches, or stored where that is
/// shorter), then the Adler-32 of `data`.
fn zlib(data: &[u8]) -> Vec<u8> {
    let mut w = BitWriter { out: Vec::with_capacity((data.len() / 8).min(RESERVE_MAX) + 64), acc: 0, n: 0 };
    w.out.extend_from_slice(&ZLIB_HEADER);
    let mut lz = Matcher::new();
    let mut tokens = Vec::with_capacity(BLOCK_INPUT.min(data.len()));
    let mut start = 0;
    loop {
        let end = lz.tokenize(data, start, &mut tokens);
        let last = end >= data.len();
        let block = data.get(start..end).unwrap_or(&[]);
        let fixed_bits = BLOCK_HEADER_BITS
            + tokens.iter().map(|t| t.fixed_bits()).sum::<u64>()
            + u64::from(FIXED_LITLEN[END_OF_BLOCK].1);
        if fixed_bits <= stored_bits(block.len()) {
            w.fixed_block(&tokens, last);
        } else {
            w.stored_blocks(block, last);
        }
        if last {
            break;
        }
        start = end;
    }
    let mut z = w.finish();
    z.extend_from_slice(&adler32(data).to_be_bytes());
    z
}

/// The most bits `len` bytes take as stored blocks.
fn stored_bits(len: usize) -> u64 {
    let blocks = len.div_ceil(STORED_BLOCK_MAX).max(1) as u64;
    blocks * STORED_OVERHEAD_BITS + 8 * len as u64
}

/// One deflate symbol before Huffman coding: a byte, or a copy of `len` bytes from `dist` back.
#[derive(Clone, Copy)]
enum Token {
    Literal(u8),
    Match { len: u32, dist: u32 },
}

impl Token {
    /// Its length in bits with the fixed codes.
    fn fixed_bits(self) -> u64 {
        match self {
            Token::Literal(b) => u64::from(FIXED_LITLEN[usize::from(b)].1),
            Token::Match { len, dist } => {
                let (sym, len_extra, _) = length_code(len);
                let (_, dist_extra, _) = distance_code(dist);
                u64::from(FIXED_LITLEN[sym].1) + u64::from(len_extra + FIXED_DIST_BITS + dist_extra)
            }
        }
    }
}

/// The length in bits of `bytes` as literals with the fixed codes.
fn literal_bits(bytes: &[u8]) -> u64 {
    bytes.iter().map(|&b| Token::Literal(b).fixed_bits()).sum()
}

/// The symbol (257..=285), extra bit count and extra bits of a match length (3..=258).
fn length_code(len: u32) -> (usize, u32, u32) {
    let x = len.saturating_sub(MIN_MATCH as u32);
    if len >= MAX_MATCH as u32 {
        (285, 0, 0)
    } else if x < 8 {
        (257 + x as usize, 0, 0)
    } else {
        // Four symbols per power of two, each with `log2(x) - 2` extra bits.
        let log = 31 - x.leading_zeros();
        let extra = log - 2;
        (257 + (4 * (log - 1) + ((x >> extra) & 3)) as usize, extra, x & ((1 << extra) - 1))
    }
}

/// The code (0..=29), extra bit count and extra bits of a match distance (1..=32768).
fn distance_code(dist: u32) -> (u32, u32, u32) {
    let x = dist.saturating_sub(1);
    if x < 4 {
        (x, 0, 0)
    } else {
        // Two codes per power of two, each with `log2(x) - 1` extra bits.
        let log = 31 - x.leading_zeros();
        let extra = log - 1;
        (2 * log + ((x >> extra) & 1), extra, x & ((1 << extra) - 1))
    }
}

/// Greedy LZ77 over hash chains: `head` holds the latest position for each hash of 3 bytes, `prev`
/// (indexed by position modulo the window) the previous position with the same hash. Positions
/// are kept modulo 2^32 and empty slots hold 0: a wrong candidate only costs a comparison, as
/// every match is measured on the bytes themselves.
struct Matcher {
    head: Vec<u32>,
    prev: Vec<u32>,
}

impl Matcher {
    fn new() -> Matcher {
        Matcher { head: vec![0; 1 << HASH_BITS], prev: vec![0; WINDOW] }
    }

    /// Replaces `tokens` with those for `data[start..end]` and returns `end`: `start +
    /// BLOCK_INPUT`, a little more if a match runs on, or the end of `data`. Positions skipped
    /// (see `SKIP_SHIFT`) are neither searched nor remembered.
    fn tokenize(&mut self, data: &[u8], start: usize, tokens: &mut Vec<Token>) -> usize {
        tokens.clear();
        let stop = start.saturating_add(BLOCK_INPUT).min(data.len());
        let (mut pos, mut misses) = (start, 0usize);
        while pos < stop {
            let (len, dist) = self.longest_match(data, pos);
            let copy = Token::Match { len: len as u32, dist: dist as u32 };
            // Only a far match of 3 bytes can cost more than its literals (a longer one takes at
            // most 25 bits against at least 32).
            let dearer = len == MIN_MATCH && copy.fixed_bits() >= literal_bits(&data[pos..pos + len]);
            if len >= MIN_MATCH && !dearer {
                tokens.push(copy);
                for p in pos..pos + len {
                    self.insert(data, p);
                }
                pos += len;
                misses = 0;
            } else {
                self.insert(data, pos);
                let step = (1 + (misses >> SKIP_SHIFT)).min(stop - pos);
                tokens.extend(data[pos..pos + step].iter().map(|&b| Token::Literal(b)));
                pos += step;
                misses += 1;
            }
        }
        pos
    }

    /// The longest earlier copy of the bytes at `pos` among `MAX_CHAIN` candidates: (length,
    /// distance), the nearest of equals; the length is below `MIN_MATCH` when there is none.
    fn longest_match(&self, data: &[u8], pos: usize) -> (usize, usize) {
        let max = data.len().saturating_sub(pos).min(MAX_MATCH);
        if max < MIN_MATCH {
            return (0, 0);
        }
        let want = &data[pos..pos + max];
        let mut best = (0, 0);
        let mut cand = self.head[hash3(data, pos)];
        let mut last_dist = 0;
        for _ in 0..MAX_CHAIN {
            // Chains lead back, within the window and the data.
            let dist = (pos as u32).wrapping_sub(cand) as usize;
            if dist <= last_dist || dist > WINDOW.min(pos) {
                break;
            }
            let from = pos - dist;
            let (len, _) = best;
            if data[from + len] == want[len] {
                let n = common_prefix(&data[from..], want);
                if n > len {
                    best = (n, dist);
                    if n == max {
                        break;
                    }
                }
            }
            cand = self.prev[from % WINDOW];
            last_dist = dist;
        }
        best
    }

    /// Records `pos` as the latest position with its hash.
    fn insert(&mut self, data: &[u8], pos: usize) {
        if pos + MIN_MATCH <= data.len() {
            let h = hash3(data, pos);
            self.prev[pos % WINDOW] = self.head[h];
            self.head[h] = pos as u32;
        }
    }
}

/// Hash of the 3 bytes at `pos` (the caller checks they exist).
fn hash3(data: &[u8], pos: usize) -> usize {
    let v = u32::from(data[pos]) | u32::from(data[pos + 1]) << 8 | u32::from(data[pos + 2]) << 16;
    (v.wrapping_mul(HASH_MUL) >> (32 - HASH_BITS)) as usize
}

/// How many leading bytes `a` and `b` share, compared 8 at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])); // exact chunks of 8
    let mut i = 0;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let diff = word(x) ^ word(y);
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..].iter().zip(&b[i..]).take_while(|(x, y)| x == y).count()
}

/// Bits packed least significant first, as deflate wants them.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    /// Bits pending in `acc`, always below 32 between calls.
    n: u32,
}

impl BitWriter {
    /// Appends the low `count` (at most 32) bits of `bits`.
    fn put(&mut self, bits: u32, count: u32) {
        let count = count.min(32);
        self.acc |= (u64::from(bits) & ((1u64 << count) - 1)) << self.n;
        self.n += count;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    /// Pads with zero bits to a byte boundary and flushes every whole byte.
    fn align(&mut self) {
        self.put(0, (8 - self.n % 8) % 8);
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.align();
        self.out
    }

    /// Appends the fixed code of a literal/length symbol.
    fn symbol(&mut self, sym: usize) {
        let (code, len) = FIXED_LITLEN[sym];
        self.put(u32::from(code), u32::from(len));
    }

    /// One block with the fixed Huffman codes.
    fn fixed_block(&mut self, tokens: &[Token], last: bool) {
        self.put(u32::from(last) | BTYPE_FIXED << 1, BLOCK_HEADER_BITS as u32);
        for &t in tokens {
            match t {
                Token::Literal(b) => self.symbol(usize::from(b)),
                Token::Match { len, dist } => {
                    let (sym, extra_bits, extra) = length_code(len);
                    self.symbol(sym);
                    self.put(extra, extra_bits);
                    let (code, extra_bits, extra) = distance_code(dist);
                    self.put(reverse_bits(code, FIXED_DIST_BITS), FIXED_DIST_BITS);
                    self.put(extra, extra_bits);
                }
            }
        }
        self.symbol(END_OF_BLOCK);
    }

    /// `bytes` as stored blocks (one, empty, if there are none); the last is final if `last`.
    fn stored_blocks(&mut self, bytes: &[u8], last: bool) {
        let mut rest = bytes;
        loop {
            let (part, tail) = rest.split_at(rest.len().min(STORED_BLOCK_MAX));
            self.put(u32::from(last && tail.is_empty()) | BTYPE_STORED << 1, BLOCK_HEADER_BITS as u32);
            self.align();
            let len = u16::try_from(part.len()).unwrap_or(u16::MAX); // parts are at most 0xFFFF
            self.out.extend_from_slice(&len.to_le_bytes());
            self.out.extend_from_slice(&(!len).to_le_bytes());
            self.out.extend_from_slice(part);
            rest = tail;
            if rest.is_empty() {
                break;
            }
        }
    }
}

/// The fixed literal/length code: (bit-reversed code, length) for each of the 288 symbols.
const fn fixed_litlen_codes() -> [(u16, u8); 288] {
    let mut table = [(0u16, 0u8); 288];
    let mut sym = 0;
    while sym < 288 {
        let (code, len) = match sym {
            0..=143 => (0x30 + sym, 8),
            144..=255 => (0x190 + sym - 144, 9),
            256..=279 => (sym - 256, 7),
            _ => (0xC0 + sym - 280, 8),
        };
        table[sym as usize] = (reverse_bits(code, len) as u16, len as u8);
        sym += 1;
    }
    table
}

/// The low `len` bits of `code` in reverse order (Huffman codes are sent most significant first).
const fn reverse_bits(code: u32, len: u32) -> u32 {
    let mut out = 0;
    let mut i = 0;
    while i < len {
        out = (out << 1) | ((code >> i) & 1);
        i += 1;
    }
    out
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
        /// The filter type of each row.
        filters: Vec<u8>,
        /// What the zlib stream was made of.
        stored_blocks: usize,
        fixed_blocks: usize,
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

    /// Bases and extra bits of the length symbols 257..=285 and of the distance codes 0..=29
    /// (RFC 1951, 3.2.5), written out rather than computed as the encoder does.
    const LEN_BASE: [u32; 29] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163,
        195, 227, 258,
    ];
    const LEN_EXTRA: [u32; 29] =
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
    const DIST_BASE: [u32; 30] = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049,
        3073, 4097, 6145, 8193, 12289, 16385, 24577,
    ];
    const DIST_EXTRA: [u32; 30] =
        [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

    /// Reads a deflate stream bit by bit, least significant bit of each byte first.
    struct Bits<'a> {
        data: &'a [u8],
        pos: usize,
    }

    impl Bits<'_> {
        fn bit(&mut self) -> u32 {
            let b = (self.data[self.pos / 8] >> (self.pos % 8)) & 1;
            self.pos += 1;
            u32::from(b)
        }

        /// An `n`-bit number sent least significant bit first (header fields, extra bits).
        fn bits(&mut self, n: u32) -> u32 {
            (0..n).fold(0, |v, i| v | self.bit() << i)
        }

        /// `code` followed by `n` more bits of a Huffman code, which is sent most significant first.
        fn code(&mut self, code: u32, n: u32) -> u32 {
            (0..n).fold(code, |c, _| c << 1 | self.bit())
        }

        /// Skips to the next byte boundary, checking the padding is zeros.
        fn align(&mut self) {
            let pad = self.pos.div_ceil(8) * 8 - self.pos;
            assert_eq!(self.bits(pad as u32), 0, "padding");
        }
    }

    /// One symbol of the fixed literal/length code (RFC 1951, 3.2.6).
    fn fixed_symbol(b: &mut Bits) -> u32 {
        let c = b.code(0, 7);
        if c <= 0b001_0111 {
            return 256 + c;
        }
        let c = b.code(c, 1);
        match c {
            0x30..=0xBF => return c - 0x30,
            0xC0..=0xC7 => return 280 + c - 0xC0,
            _ => {}
        }
        let c = b.code(c, 1);
        assert!((0x190..=0x1FF).contains(&c), "bad code {c:#b}");
        144 + c - 0x190
    }

    /// Inflates a zlib stream of stored and fixed-Huffman blocks (dynamic ones are refused),
    /// checking the header, LEN/NLEN, every symbol and distance, the padding and the Adler-32.
    /// Returns the data and the number of stored and of fixed blocks.
    fn inflate(z: &[u8]) -> (Vec<u8>, usize, usize) {
        assert_eq!(((u16::from(z[0]) << 8) | u16::from(z[1])) % 31, 0, "zlib header check");
        assert_eq!(z[0], 0x78, "deflate, 32 KiB window");
        assert_eq!(z[1] & 0x20, 0, "no dictionary");
        let mut b = Bits { data: &z[2..], pos: 0 };
        let (mut out, mut stored, mut fixed) = (Vec::new(), 0, 0);
        loop {
            let last = b.bits(1) == 1;
            match b.bits(2) {
                0 => {
                    b.align();
                    let (len, nlen) = (b.bits(16), b.bits(16));
                    assert_eq!(len ^ 0xFFFF, nlen, "LEN/NLEN");
                    out.extend_from_slice(&b.data[b.pos / 8..b.pos / 8 + len as usize]);
                    b.pos += 8 * len as usize;
                    stored += 1;
                }
                1 => {
                    loop {
                        let sym = fixed_symbol(&mut b);
                        let i = match sym {
                            0..=255 => {
                                out.push(sym as u8);
                                continue;
                            }
                            256 => break,
                            257..=285 => (sym - 257) as usize,
                            _ => panic!("length symbol {sym}"),
                        };
                        let len = LEN_BASE[i] + b.bits(LEN_EXTRA[i]);
                        let code = b.code(0, 5) as usize;
                        assert!(code < 30, "distance code {code}");
                        let dist = (DIST_BASE[code] + b.bits(DIST_EXTRA[code])) as usize;
                        assert!(dist <= out.len() && dist <= 32768, "distance {dist} after {}", out.len());
                        for _ in 0..len {
                            out.push(out[out.len() - dist]);
                        }
                    }
                    fixed += 1;
                }
                t => panic!("block type {t}"),
            }
            if last {
                break;
            }
        }
        b.align();
        let p = 2 + b.pos / 8;
        assert_eq!(be32(&z[p..]), adler_naive(&out), "Adler-32");
        assert_eq!(p + 4, z.len());
        (out, stored, fixed)
    }

    fn decode(png: &[u8]) -> Decoded {
        let cs = chunks(png);
        assert_eq!(&cs[0].0, b"IHDR");
        assert_eq!(&cs.last().unwrap().0, b"IEND");
        let ihdr = &cs[0].1;
        assert_eq!(&ihdr[8..], &IHDR_TAIL);
        let (width, height) = (be32(&ihdr[0..]), be32(&ihdr[4..]));
        let z: Vec<u8> = cs.iter().filter(|(k, _)| k == b"IDAT").flat_map(|(_, d)| d.clone()).collect();
        let (raw, stored_blocks, fixed_blocks) = inflate(&z);
        let row = width as usize * 3;
        assert_eq!(raw.len(), (row + 1) * height as usize);
        let mut rgb = Vec::with_capacity(row * height as usize);
        let mut filters = Vec::with_capacity(height as usize);
        for line in raw.chunks(row + 1) {
            let start = rgb.len();
            for (i, &v) in line[1..].iter().enumerate() {
                let left = if i >= 3 { rgb[start + i - 3] } else { 0 };
                let up = if start > 0 { rgb[start + i - row] } else { 0 };
                rgb.push(match line[0] {
                    FILTER_NONE => v,
                    FILTER_SUB => v.wrapping_add(left),
                    FILTER_UP => v.wrapping_add(up),
                    f => panic!("filter {f}"),
                });
            }
            filters.push(line[0]);
        }
        Decoded { width, height, rgb, filters, stored_blocks, fixed_blocks }
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

        fn byte(&mut self) -> u8 {
            (self.next() * 256.0) as u8
        }

        /// A number in `0..n`.
        fn below(&mut self, n: usize) -> usize {
            (self.next() * n as f64) as usize
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
        let (w, h) = (700u32, 600u32); // 1.26 MB of noise: 20 stored blocks, 2 IDAT chunks
        let mut rng = Rng(3);
        let rgb: Vec<u8> = (0..w * h * 3).map(|_| rng.byte()).collect();
        let png = encode_png(w, h, &rgb);
        let idats = chunks(&png).iter().filter(|(k, _)| k == b"IDAT").count();
        assert_eq!(idats, 2);
        let d = decode(&png);
        assert_eq!(d.rgb, rgb);
        assert!(d.stored_blocks >= 20, "{} stored, {} fixed", d.stored_blocks, d.fixed_blocks);
        assert!(png.len() < rgb.len() + rgb.len() / 1000 + 1000, "noise grew to {} bytes", png.len());
    }

    #[test]
    fn encoder_round_trips_random_flat_and_tiny_images() {
        let check = |w: u32, h: u32, rgb: &[u8]| {
            let d = decode(&encode_png(w, h, rgb));
            assert_eq!((d.width, d.height), (w, h));
            assert_eq!(d.rgb, rgb, "{w}x{h}");
            d
        };
        check(1, 1, &[1, 2, 3]);
        for (w, h) in [(0, 0), (0, 5), (5, 0)] {
            check(w, h, &[]);
        }
        for colour in [WHITE, BLACK, [0x80, 0x7F, 0x01]] {
            for (w, h) in [(1, 1), (1, 300), (300, 1), (97, 61), (400, 300)] {
                let d = check(w, h, &colour.repeat(w as usize * h as usize));
                let want = if colour == BLACK { FILTER_NONE } else { FILTER_UP }; // zeros stay zeros
                assert!(d.filters.iter().skip(1).all(|&f| f == want), "{w}x{h} of {colour:?}");
            }
        }
        let mut rng = Rng(11);
        for i in 0..60 {
            let (w, h) = (1 + rng.below(90), 1 + rng.below(90));
            // Noise; flat rectangles of a few colours (like a chart) over noise; the same over white.
            let mut rgb: Vec<u8> = (0..w * h * 3).map(|_| rng.byte()).collect();
            if i % 3 == 2 {
                rgb.fill(0xFF);
            }
            if i % 3 != 0 {
                let colours: Vec<Rgb> =
                    (0..1 + rng.below(4)).map(|_| [rng.byte(), rng.byte(), rng.byte()]).collect();
                for _ in 0..1 + rng.below(30) {
                    let colour = colours[rng.below(colours.len())];
                    let (x0, y0) = (rng.below(w), rng.below(h));
                    let (x1, y1) = ((x0 + 1 + rng.below(w)).min(w), (y0 + 1 + rng.below(h)).min(h));
                    for y in y0..y1 {
                        for x in x0..x1 {
                            rgb[(y * w + x) * 3..][..3].copy_from_slice(&colour);
                        }
                    }
                }
            }
            check(w as u32, h as u32, &rgb);
        }
    }

    #[test]
    fn deflate_round_trips_edge_cases() {
        let mut rng = Rng(5);
        let mut noise = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.byte()).collect() };
        let chunk = noise(40_000);
        let cases = [
            vec![],
            vec![7],
            vec![7, 7],
            vec![7; 3],
            vec![1, 2, 3, 1, 2, 3],
            vec![0; MAX_MATCH],
            vec![0; MAX_MATCH + 1],
            vec![0xFF; 100_000],
            noise(100_000),
            // Repeats at the window's edge and just past it.
            [&chunk[..WINDOW], &chunk[..WINDOW]].concat(),
            [&chunk[..WINDOW + 1], &chunk[..WINDOW + 1]].concat(),
            // Matches running past the end of a block, after noise and after a run.
            [noise(BLOCK_INPUT - 2), vec![9; 1000], noise(10)].concat(),
            [vec![9; BLOCK_INPUT - 2], noise(3000), vec![9; 1000]].concat(),
            (0..300_000u32).map(|i| (i % 251) as u8 ^ (i / 7000) as u8).collect(),
        ];
        for data in cases {
            let (out, stored, fixed) = inflate(&zlib(&data));
            assert_eq!(out, data, "{} bytes", data.len());
            assert!(stored + fixed >= 1);
        }
    }

    #[test]
    fn every_literal_length_and_distance_decodes() {
        let mut tokens: Vec<Token> = (0..=255).map(Token::Literal).collect();
        tokens.extend((0..40_000u32).map(|i| Token::Literal((i * 7 % 256) as u8)));
        tokens.extend((MIN_MATCH as u32..=MAX_MATCH as u32).map(|len| Token::Match { len, dist: len * 97 }));
        tokens.extend((1..=WINDOW as u32).map(|dist| Token::Match { len: 3 + dist % 61, dist }));
        let mut want = Vec::new();
        for &t in &tokens {
            match t {
                Token::Literal(b) => want.push(b),
                Token::Match { len, dist } => {
                    for _ in 0..len {
                        want.push(want[want.len() - dist as usize]);
                    }
                }
            }
        }
        let mut w = BitWriter { out: ZLIB_HEADER.to_vec(), acc: 0, n: 0 };
        w.fixed_block(&tokens, true);
        let mut z = w.finish();
        z.extend_from_slice(&adler32(&want).to_be_bytes());
        let (out, stored, fixed) = inflate(&z);
        assert_eq!((stored, fixed), (0, 1));
        assert!(out == want, "{} bytes decoded, {} wanted", out.len(), want.len());
        let bits: u64 = tokens.iter().map(|t| t.fixed_bits()).sum();
        assert_eq!((bits + 3 + 7).div_ceil(8) as usize, z.len() - 6, "fixed_bits agrees with the writer");
    }

    #[test]
    fn sample_chart_is_small_and_round_trips() {
        let t = sample_timeline();
        let png = render(&t, 1400, 820);
        assert!(png.len() < 200_000, "{} bytes", png.len());
        let d = decode(&png);
        assert!(d.rgb == paint(&t, 1400, 820).px, "pixels differ");
        assert!(d.fixed_blocks > 0);
        for f in [FILTER_SUB, FILTER_UP] {
            assert!(d.filters.contains(&f), "filter {f} unused");
        }
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
    fn a_million_samples_render() {
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
        let png = render(&t, 1400, 820);
        assert_eq!(decode(&png).width, 1400);
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
