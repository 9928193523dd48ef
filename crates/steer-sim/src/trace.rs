//! Memory-access traces: reading them and replaying their data accesses through one core's caches.
//!
//! Two formats are read, told apart by their first bytes (`docs/trace-format.md` has the details):
//! - Dinero "din" text: `LABEL ADDRESS [SIZE]` per line, LABEL 0 read, 1 write, 2 instruction
//!   fetch, 3 escape and 4 flush (both skipped), ADDRESS hexadecimal, SIZE decimal bytes (default 1);
//! - steer's binary format: the magic `STEERTR1`, then one little-endian u64 per access holding the
//!   kind in bits 63..62 and the byte address in bits 61..0; every access is one byte wide.
//!
//! Readers stream (a trace may be far larger than memory). `replay` feeds reads and writes to one
//! core's caches (`single_core`, or `Hierarchy::core_access` where the platform needs it) and
//! reports the per-level counters, which are defined like pycachesim's: with every level
//! non-inclusive, LRU and `write_hit_updates_recency = false`, a replay counts exactly what a
//! pycachesim chain L1 -> L2 -> L3 -> memory counts.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::hierarchy::{Hierarchy, LevelStats};
use crate::platform::{PlatformSpec, TopologySpec};
use crate::units::{Line, Time};

mod single_core;
use single_core::SetGroups;

/// The first 8 bytes of a binary trace.
pub const BINARY_MAGIC: &[u8; 8] = b"STEERTR1";

/// Largest address a binary record can hold (62 bits).
pub const BINARY_MAX_ADDR: u64 = (1 << 62) - 1;

/// The smallest line steer models (`line_bytes` is validated to be at least 8), so an access inside
/// one aligned 8-byte block touches a single line on every platform.
const MIN_LINE_BYTES: u64 = 8;

/// Simulated time between two line accesses of a replay; counts do not depend on it.
const STEP: Time = Time(1000);

/// How many accesses ahead `Replayer::access_all` prefetches host memory.
const PREFETCH_DISTANCE: usize = 16;

/// Bytes a binary trace is read by: a batch of `SetGroups`, replayed from the reader's buffer.
const BINARY_BLOCK: usize = single_core::BATCH * 8;

/// Din records `replay` decodes before handing them to `Replayer::access_all`: a batch of
/// `SetGroups`.
const REPLAY_CHUNK: usize = single_core::BATCH;

/// What an access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessKind {
    Read,
    Write,
    InstructionFetch,
}

impl AccessKind {
    /// The din label and the binary kind code (they agree).
    fn code(self) -> u64 {
        match self {
            AccessKind::Read => 0,
            AccessKind::Write => 1,
            AccessKind::InstructionFetch => 2,
        }
    }

    fn from_code(code: u64) -> Option<AccessKind> {
        [AccessKind::Read, AccessKind::Write, AccessKind::InstructionFetch].get(code as usize).copied()
    }
}

/// One access of a trace: `size` bytes from `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    pub kind: AccessKind,
    pub addr: u64,
    pub size: u32,
}

/// A record as `replay_records` reads it: a `TraceRecord`, or a binary record as read.
trait Record: Copy + Sync {
    /// The kind's din label and binary code (see `AccessKind::code`).
    fn code(self) -> u64;
    fn addr(self) -> u64;
    /// Bytes accessed from `addr` (0 counts as 1).
    fn size(self) -> u32;
}

impl Record for TraceRecord {
    #[inline(always)]
    fn code(self) -> u64 {
        self.kind.code()
    }
    #[inline(always)]
    fn addr(self) -> u64 {
        self.addr
    }
    #[inline(always)]
    fn size(self) -> u32 {
        self.size
    }
}

/// A binary record checked by `TraceReader::binary_records` (its kind code is defined).
impl Record for [u8; 8] {
    #[inline(always)]
    fn code(self) -> u64 {
        u64::from_le_bytes(self) >> 62
    }
    #[inline(always)]
    fn addr(self) -> u64 {
        u64::from_le_bytes(self) & BINARY_MAX_ADDR
    }
    #[inline(always)]
    fn size(self) -> u32 {
        1
    }
}

/// How a trace is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    Din,
    Binary,
}

/// A trace that cannot be read or replayed, as one line: `origin:line: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The trace's name (usually its path), or the offending key for a platform or CPU problem.
    pub origin: String,
    /// 1-based line of a din trace, when the error is about one line.
    pub line: Option<u64>,
    pub message: String,
}

impl TraceError {
    fn new(origin: impl Into<String>, line: Option<u64>, message: impl Into<String>) -> TraceError {
        TraceError { origin: origin.into(), line, message: message.into() }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.origin, line, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for TraceError {}

/// A streaming reader of either trace format, yielding records in order.
///
/// After the first error the reader yields nothing more: a trace is replayed whole or not at all.
pub struct TraceReader<R> {
    /// The bytes read to sniff the format (given back for din), then the rest of the input.
    input: io::Chain<io::Cursor<Vec<u8>>, R>,
    origin: String,
    format: TraceFormat,
    /// Din: lines read; binary: records read.
    position: u64,
    /// Din escape (3) and flush (4) records passed over.
    skipped: u64,
    text: Vec<u8>,
    /// Binary: bytes read ahead (up to `BINARY_BLOCK` at a time) and where the next record starts.
    block: Vec<u8>,
    block_pos: usize,
    failed: bool,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file; errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let file = File::open(path).map_err(|e| TraceError::new(&origin, None, format!("cannot open: {e}")))?;
        TraceReader::new(BufReader::with_capacity(1 << 16, file), origin)
    }
}

impl<R: BufRead> TraceReader<R> {
    /// Reads the first bytes to detect the format: the binary magic, else din text. `origin`
    /// names the trace in errors.
    pub fn new(mut input: R, origin: impl Into<String>) -> Result<Self, TraceError> {
        let origin = origin.into();
        let mut head = Vec::with_capacity(BINARY_MAGIC.len());
        // `take(..).read_to_end` keeps reading through short reads until 8 bytes or the end.
        input
            .by_ref()
            .take(BINARY_MAGIC.len() as u64)
            .read_to_end(&mut head)
            .map_err(|e| TraceError::new(&origin, None, format!("cannot read: {e}")))?;
        let format = if head == BINARY_MAGIC {
            head.clear();
            TraceFormat::Binary
        } else {
            TraceFormat::Din
        };
        Ok(TraceReader {
            input: io::Cursor::new(head).chain(input),
            origin,
            format,
            position: 0,
            skipped: 0,
            text: Vec::new(),
            block: Vec::new(),
            block_pos: 0,
            failed: false,
        })
    }

    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// Din escape and flush records skipped so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Appends the next `count` records to `out`, fewer only at the end of the trace. Faster
    /// than the iterator: binary records already read are decoded in one loop, and so are din
    /// lines of the plain form `LABEL ADDRESS [SIZE]` (see `parse_plain_din_line`).
    pub fn read_chunk(&mut self, out: &mut Vec<TraceRecord>, count: usize) -> Result<(), TraceError> {
        let goal = out.len() + count;
        while out.len() < goal {
            let decoded = match self.format {
                _ if self.failed => 0,
                TraceFormat::Binary => self.decode_block(out, goal),
                TraceFormat::Din => self
                    .decode_plain_lines(out, goal)
                    .map_err(|e| TraceError::new(&self.origin, None, format!("cannot read: {e}")))?,
            };
            if decoded > 0 {
                continue;
            }
            // A binary block used up, cut short or holding an undefined record, or a din line that
            // is not plain or not read yet: the iterator reads on, or reports the error.
            match self.next() {
                Some(record) => out.push(record?),
                None => break,
            }
        }
        Ok(())
    }

    /// The next well-formed records of a binary trace, as read (up to a block of them), or the
    /// error of the record after the last well-formed one; `None` at the end. Replaying them from
    /// the reader's buffer saves decoding them into `TraceRecord`s.
    pub fn binary_records(&mut self) -> Result<Option<&[[u8; 8]]>, TraceError> {
        debug_assert_eq!(self.format, TraceFormat::Binary);
        if self.failed {
            return Ok(None);
        }
        if self.block.len() - self.block_pos < 8 {
            self.refill_block().map_err(|e| TraceError::new(&self.origin, None, format!("cannot read: {e}")))?;
        }
        let start = self.block_pos;
        let (records, _) = self.block[start..].as_chunks::<8>();
        // Kind code 3 is undefined: checked for all at once (the check vectorises), then found.
        let undefined = |record: &[u8; 8]| record.code() == 3;
        let valid = if records.iter().fold(false, |any, record| any | undefined(record)) {
            records.iter().position(undefined).unwrap_or(records.len())
        } else {
            records.len()
        };
        if valid == 0 {
            // The end, a record cut short or an undefined one: the iterator says which.
            return self.next().transpose().map(|_| None);
        }
        self.block_pos += valid * 8;
        self.position += valid as u64;
        Ok(Some(&self.block[start..].as_chunks::<8>().0[..valid]))
    }

    /// Decodes the well-formed binary records read ahead into `out`, until it holds `goal`;
    /// returns how many.
    fn decode_block(&mut self, out: &mut Vec<TraceRecord>, goal: usize) -> usize {
        let before = out.len();
        for bytes in self.block[self.block_pos..].chunks_exact(8).take(goal - before) {
            let word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            let Some(kind) = AccessKind::from_code(word >> 62) else { break };
            out.push(TraceRecord { kind, addr: word & BINARY_MAX_ADDR, size: 1 });
        }
        let decoded = out.len() - before;
        self.block_pos += decoded * 8;
        self.position += decoded as u64;
        decoded
    }

    /// Decodes the plain din lines already read (up to the first other line) into `out`, until it
    /// holds `goal`; returns how many.
    fn decode_plain_lines(&mut self, out: &mut Vec<TraceRecord>, goal: usize) -> io::Result<usize> {
        let before = out.len();
        let text = self.input.fill_buf()?;
        let mut used = 0;
        while out.len() < goal {
            let rest = &text[used..];
            let Some(end) = rest.iter().position(|&b| b == b'\n') else { break };
            let Some(record) = parse_plain_din_line(&rest[..end]) else { break };
            out.push(record);
            used += end + 1;
        }
        self.input.consume(used);
        let decoded = out.len() - before;
        self.position += decoded as u64;
        Ok(decoded)
    }

    fn next_din(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        loop {
            self.text.clear();
            match self.input.read_until(b'\n', &mut self.text) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(TraceError::new(&self.origin, None, format!("cannot read: {e}")))),
            }
            self.position += 1;
            match parse_din_line(&self.text) {
                Ok(DinLine::Access(record)) => return Some(Ok(record)),
                Ok(DinLine::Skipped) => self.skipped += 1,
                Ok(DinLine::Empty) => {}
                Err(message) => return Some(Err(TraceError::new(&self.origin, Some(self.position), message))),
            }
        }
    }

    fn next_binary(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        if self.block.len() - self.block_pos < 8 {
            if let Err(e) = self.refill_block() {
                return Some(Err(TraceError::new(&self.origin, None, format!("cannot read: {e}"))));
            }
        }
        let rest = &self.block[self.block_pos..];
        if rest.is_empty() {
            return None;
        }
        let index = self.position;
        self.position += 1;
        let offset = BINARY_MAGIC.len() as u64 + index * 8;
        let Some(bytes) = rest.first_chunk::<8>() else {
            let got = rest.len();
            return Some(Err(TraceError::new(
                &self.origin,
                None,
                format!("truncated record {index} at byte {offset}: {got} of 8 bytes (the file was cut short)"),
            )));
        };
        self.block_pos += 8;
        Some(decode_binary(u64::from_le_bytes(*bytes)).map_err(|message| {
            TraceError::new(&self.origin, None, format!("record {index} at byte {offset}: {message}"))
        }))
    }

    /// Keeps the unread bytes (less than one record) and reads up to `BINARY_BLOCK` more after them.
    fn refill_block(&mut self) -> io::Result<()> {
        self.block.drain(..self.block_pos);
        self.block_pos = 0;
        let kept = self.block.len();
        self.block.resize(kept + BINARY_BLOCK, 0);
        let read = read_up_to(&mut self.input, &mut self.block[kept..]);
        self.block.truncate(kept + read.as_ref().map_or(0, |&got| got));
        read.map(drop)
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = match self.format {
            TraceFormat::Din => self.next_din(),
            TraceFormat::Binary => self.next_binary(),
        };
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// Fills `buf` as far as the input allows; returns how many bytes were read (less only at the end).
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

enum DinLine {
    Access(TraceRecord),
    /// An escape or flush record.
    Skipped,
    /// Blank or comment only.
    Empty,
}

/// Parses one din line (with its newline, if any); errors are messages without the position.
fn parse_din_line(bytes: &[u8]) -> Result<DinLine, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text (a binary trace must start with STEERTR1)")?;
    let text = text.find('#').map_or(text, |comment| &text[..comment]);
    let mut fields = text.split_ascii_whitespace();
    let Some(label) = fields.next() else { return Ok(DinLine::Empty) };
    let kind = match label {
        "0" => AccessKind::Read,
        "1" => AccessKind::Write,
        "2" => AccessKind::InstructionFetch,
        // Dinero's escape and flush records carry nothing to simulate.
        "3" | "4" => return Ok(DinLine::Skipped),
        other => {
            return Err(format!(
                "unknown label `{other}` (expected 0 read, 1 write, 2 instruction fetch, 3 escape or 4 flush)"
            ))
        }
    };
    let addr_text = fields.next().ok_or("missing address after the label")?;
    let addr = parse_hex(addr_text).ok_or_else(|| format!("`{addr_text}` is not a 64-bit hexadecimal address"))?;
    let size = match fields.next() {
        None => 1,
        Some(size_text) => match parse_decimal(size_text) {
            Some(0) => return Err("the size must be at least 1 byte".into()),
            Some(size) => size,
            None => return Err(format!("`{size_text}` is not a size in bytes (a decimal number up to 2^32-1)")),
        },
    };
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected `{extra}` after the size (expected LABEL ADDRESS [SIZE])"));
    }
    if addr.checked_add(size as u64 - 1).is_none() {
        return Err(format!("a {size}-byte access at {addr:#x} runs past the end of the address space"));
    }
    Ok(DinLine::Access(TraceRecord { kind, addr, size }))
}

/// A din line (without its `\n`) of the plain form: a read, write or instruction fetch label, one
/// space or tab, a hexadecimal address of at most 16 digits, optionally one space or tab and a
/// decimal size of at most 10 digits, optionally `\r`. Its record is the one `parse_din_line`
/// returns; any other line (comments, blank lines, other labels, errors) is `None`, left to it.
fn parse_plain_din_line(line: &[u8]) -> Option<TraceRecord> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let [label, b' ' | b'\t', fields @ ..] = line else { return None };
    let kind = match label {
        b'0' => AccessKind::Read,
        b'1' => AccessKind::Write,
        b'2' => AccessKind::InstructionFetch,
        _ => return None,
    };
    let (addr_text, size_text) = match fields.iter().position(|&b| b == b' ' || b == b'\t') {
        Some(gap) => (&fields[..gap], Some(&fields[gap + 1..])),
        None => (fields, None),
    };
    let digits = addr_text.strip_prefix(b"0x").or_else(|| addr_text.strip_prefix(b"0X")).unwrap_or(addr_text);
    if !(1..=16).contains(&digits.len()) {
        return None;
    }
    let addr = digits.iter().try_fold(0u64, |value, &digit| Some(value << 4 | (digit as char).to_digit(16)? as u64))?;
    let size = match size_text {
        None => 1,
        Some(text) if (1..=10).contains(&text.len()) => {
            let size = text.iter().try_fold(0u64, |value, &digit| {
                digit.is_ascii_digit().then(|| value * 10 + (digit - b'0') as u64)
            })?;
            u32::try_from(size).ok().filter(|&size| size > 0)?
        }
        Some(_) => return None,
    };
    addr.checked_add(size as u64 - 1)?;
    Some(TraceRecord { kind, addr, size })
}

/// Hexadecimal with or without `0x`; digits only (`from_str_radix` would also take a sign).
fn parse_hex(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    if digits.is_empty() {
        return None;
    }
    // One pass over the digits (this runs once per din line).
    digits.bytes().try_fold(0u64, |value, digit| {
        let nibble = (digit as char).to_digit(16)? as u64;
        value.checked_mul(16).map(|shifted| shifted | nibble)
    })
}

fn parse_decimal(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Encodes one access as a binary record, or says why it cannot be.
///
/// Binary records are one-byte accesses, so only an access that stays inside one aligned 8-byte
/// block is accepted: it touches one line on every platform, exactly as its one-byte record does.
pub fn encode_binary(record: &TraceRecord) -> Result<u64, String> {
    if record.addr > BINARY_MAX_ADDR {
        return Err(format!("address {:#x} needs more than 62 bits", record.addr));
    }
    let last = record.addr.saturating_add(record.size.max(1) as u64 - 1);
    if record.addr / MIN_LINE_BYTES != last / MIN_LINE_BYTES {
        return Err(format!(
            "a {}-byte access at {:#x} crosses an 8-byte boundary and may touch two lines; \
             binary records are one-line accesses, so split it",
            record.size, record.addr
        ));
    }
    Ok(record.kind.code() << 62 | record.addr)
}

/// Decodes one binary record.
pub fn decode_binary(word: u64) -> Result<TraceRecord, String> {
    let code = word >> 62;
    let kind = AccessKind::from_code(code)
        .ok_or_else(|| format!("kind {code} is not defined (0 read, 1 write, 2 instruction fetch)"))?;
    Ok(TraceRecord { kind, addr: word & BINARY_MAX_ADDR, size: 1 })
}

/// Writes a binary trace (magic, then one record per access); returns the number of records.
/// An access that `encode_binary` refuses fails with `InvalidInput` naming its index.
pub fn write_binary<W: Write>(out: W, records: impl IntoIterator<Item = TraceRecord>) -> io::Result<u64> {
    let mut out = BufWriter::new(out);
    out.write_all(BINARY_MAGIC)?;
    let mut count = 0u64;
    for record in records {
        let word = encode_binary(&record)
            .map_err(|message| io::Error::new(io::ErrorKind::InvalidInput, format!("record {count}: {message}")))?;
        out.write_all(&word.to_le_bytes())?;
        count += 1;
    }
    out.flush()?;
    Ok(count)
}

/// Counters of one cache level after a replay.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LevelReport {
    #[serde(flatten)]
    pub counts: LevelStats,
    /// `read_hits + write_hits`.
    pub hits: u64,
}

impl From<&LevelStats> for LevelReport {
    fn from(counts: &LevelStats) -> LevelReport {
        LevelReport { counts: counts.clone(), hits: counts.read_hits + counts.write_hits }
    }
}

/// Lines moved between the caches and DRAM.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MemoryReport {
    /// Lines read from DRAM (L3 misses, write-allocate fetches included).
    pub reads: u64,
    /// Lines written to DRAM (dirty L3 evictions).
    pub writes: u64,
}

/// What a replay counted.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    /// Data accesses replayed (reads and writes).
    pub accesses: u64,
    /// Records not modelled: instruction fetches, din escapes and flushes.
    pub skipped: u64,
    /// Line accesses issued to the hierarchy (an access spanning two lines counts two).
    pub line_ops: u64,
    pub l1d: LevelReport,
    pub l2: LevelReport,
    pub l3: LevelReport,
    pub memory: MemoryReport,
    /// Wall-clock seconds the replay took, reading the trace included.
    pub host_seconds: f64,
}

/// Which caches a `Replayer` runs the trace through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayEngine {
    /// `single_core::SetGroups`: one core's caches alone, compact and fast, as independent groups
    /// of sets.
    SingleCore,
    /// The coherent `Hierarchy`, for platforms the single-core engine cannot replay exactly.
    General,
}

/// Either engine, behind what replaying needs of it.
trait LineSink {
    /// Whether `prefetch_host` does anything (sorting accesses by group of sets reads no set).
    const PREFETCHES: bool = false;
    /// Starts loading the host memory a later access of `line` will read (a hint).
    fn prefetch_host(&self, _line: u64) {}
    fn access(&mut self, line: u64, write: bool);
}

/// The general path: the hierarchy of a one-core platform, accessed as its CPU 0.
struct GeneralPath {
    hierarchy: Hierarchy,
    now: Time,
}

impl LineSink for GeneralPath {
    const PREFETCHES: bool = true;
    fn prefetch_host(&self, line: u64) {
        self.hierarchy.prefetch_host(0, Line(line));
    }
    fn access(&mut self, line: u64, write: bool) {
        self.now += STEP;
        self.hierarchy.core_access(0, Line(line), write, self.now);
    }
}

enum Caches {
    SingleCore(Box<SetGroups>),
    General(Box<GeneralPath>),
}

/// Replays accesses one by one on one CPU; `replay` drives it from a trace, benchmarks directly.
pub struct Replayer {
    caches: Caches,
    line_bits: u32,
    line_bytes: u64,
    accesses: u64,
    skipped: u64,
}

impl Replayer {
    /// Validates the platform and the CPU number, and builds the caches of that CPU's core.
    ///
    /// Only one core's caches (and its CCX's L3) are built: a single trace never touches the
    /// others, so the counts are those of the full platform at a fraction of its memory. They are
    /// `SingleCore`'s unless the platform uses what only the general hierarchy models (see
    /// `single_core::unsupported`); both count alike.
    pub fn new(platform: &PlatformSpec, cpu: u32) -> Result<Replayer, TraceError> {
        platform.validate("platform").map_err(|e| TraceError::new(e.path, None, e.message))?;
        let cpus = platform.topology.cpus();
        if cpu >= cpus {
            return Err(TraceError::new(
                "cpu",
                None,
                format!("CPU {cpu} does not exist (platform `{}` has CPUs 0..{})", platform.name, cpus - 1),
            ));
        }
        let caches = if single_core::unsupported(platform).is_none() {
            Caches::SingleCore(Box::new(SetGroups::new(platform)))
        } else {
            let mut one_core = platform.clone();
            one_core.topology = TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 1, threads_per_core: 1 };
            Caches::General(Box::new(GeneralPath { hierarchy: Hierarchy::new(&one_core), now: Time::ZERO }))
        };
        Ok(Replayer {
            caches,
            line_bits: platform.line_bits(),
            line_bytes: platform.line_bytes() as u64,
            accesses: 0,
            skipped: 0,
        })
    }

    pub fn engine(&self) -> ReplayEngine {
        match self.caches {
            Caches::SingleCore(_) => ReplayEngine::SingleCore,
            Caches::General(_) => ReplayEngine::General,
        }
    }

    /// Replays one access: every line it touches, in address order. Instruction fetches are not
    /// modelled (there is no L1I) and only counted as skipped. A size of 0 counts as 1 byte.
    pub fn access(&mut self, record: &TraceRecord) {
        self.access_all(std::slice::from_ref(record));
    }

    /// Replays accesses in order as `access` does.
    pub fn access_all(&mut self, records: &[TraceRecord]) {
        self.replay_all(records);
    }

    fn replay_all(&mut self, records: &[impl Record]) {
        let replayed = match &mut self.caches {
            Caches::SingleCore(caches) => caches.replay(records, self.line_bits),
            Caches::General(caches) => replay_records(caches.as_mut(), records, self.line_bits),
        };
        self.accesses += replayed;
        // The others are instruction fetches.
        self.skipped += records.len() as u64 - replayed;
    }

    /// Counts records skipped before they reached `access` (din escapes and flushes).
    pub fn add_skipped(&mut self, count: u64) {
        self.skipped += count;
    }

    /// The counters so far; `host_seconds` is the caller's measurement.
    pub fn report(&self, host_seconds: f64) -> TraceReport {
        let (line_ops, [l1d, l2, l3], memory) = match &self.caches {
            Caches::SingleCore(caches) => {
                let (reads, writes) = caches.memory_lines();
                (caches.line_ops(), caches.level_stats(), MemoryReport { reads, writes })
            }
            Caches::General(general) => {
                let hierarchy = &general.hierarchy;
                let (read_bytes, write_bytes) = hierarchy
                    .memory
                    .stats()
                    .fold((0, 0), |(r, w), channel| (r + channel.read_bytes, w + channel.write_bytes));
                let stats = &hierarchy.stats;
                (
                    stats.line_ops,
                    [stats.l1d.clone(), stats.l2.clone(), stats.l3.clone()],
                    MemoryReport { reads: read_bytes / self.line_bytes, writes: write_bytes / self.line_bytes },
                )
            }
        };
        TraceReport {
            accesses: self.accesses,
            skipped: self.skipped,
            line_ops,
            l1d: LevelReport::from(&l1d),
            l2: LevelReport::from(&l2),
            l3: LevelReport::from(&l3),
            memory,
            host_seconds,
        }
    }
}

/// Replays the reads and writes among `records` into `caches`, each line an access touches in
/// address order; returns how many were replayed (instruction fetches are not modelled).
///
/// It asks the host to start loading the L3 set of the access `PREFETCH_DISTANCE` places ahead
/// (once per run of accesses to one line): a replay through a large L3 is bound by host cache
/// misses, and this lets them overlap.
fn replay_records<S: LineSink>(caches: &mut S, records: &[impl Record], line_bits: u32) -> u64 {
    let mut replayed = 0;
    let mut prefetched = None;
    for (i, &record) in records.iter().enumerate() {
        if let Some(ahead) = records.get(i + PREFETCH_DISTANCE).filter(|_| S::PREFETCHES) {
            let line = ahead.addr() >> line_bits;
            if prefetched != Some(line) {
                caches.prefetch_host(line);
                prefetched = Some(line);
            }
        }
        // Comparisons, not a match: reads and writes mix unpredictably in most traces.
        let code = record.code();
        if code == AccessKind::InstructionFetch.code() {
            continue;
        }
        let write = code == AccessKind::Write.code();
        replayed += 1;
        let last = record.addr().saturating_add(record.size().max(1) as u64 - 1) >> line_bits;
        let mut line = record.addr() >> line_bits;
        // Not a `..=` range: its iterator costs more than an access that hits.
        loop {
            caches.access(line, write);
            if line == last {
                break;
            }
            line += 1;
        }
    }
    replayed
}

/// Replays a whole trace on logical CPU `cpu` of `platform`, from empty caches.
pub fn replay<R: BufRead>(
    mut reader: TraceReader<R>,
    platform: &PlatformSpec,
    cpu: u32,
) -> Result<TraceReport, TraceError> {
    let start = Instant::now();
    let mut replayer = Replayer::new(platform, cpu)?;
    if reader.format() == TraceFormat::Binary {
        while let Some(records) = reader.binary_records()? {
            replayer.replay_all(records);
        }
    } else {
        let mut chunk = Vec::with_capacity(REPLAY_CHUNK);
        loop {
            chunk.clear();
            reader.read_chunk(&mut chunk, REPLAY_CHUNK)?;
            if chunk.is_empty() {
                break;
            }
            replayer.access_all(&chunk);
        }
    }
    replayer.add_skipped(reader.skipped());
    Ok(replayer.report(start.elapsed().as_secs_f64()))
}

/// Opens a trace file (either format) and replays it; errors name the file.
pub fn replay_path(path: impl AsRef<Path>, platform: &PlatformSpec, cpu: u32) -> Result<TraceReport, TraceError> {
    replay(TraceReader::open(path)?, platform, cpu)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::Cursor;

    use super::*;
    use crate::platform::{CacheSpec, Relation};
    use crate::units::Rng;

    fn read_all(bytes: &[u8]) -> Result<Vec<TraceRecord>, TraceError> {
        TraceReader::new(Cursor::new(bytes.to_vec()), "t.din")?.collect()
    }

    fn record(kind: AccessKind, addr: u64, size: u32) -> TraceRecord {
        TraceRecord { kind, addr, size }
    }

    /// One core; every level non-inclusive LRU with 256-byte lines, write hits not refreshing
    /// recency (pycachesim's behaviour). `(KiB, ways)` per level.
    fn tiny(l1: (u64, u32), l2: (u64, u32), l3: (u64, u32)) -> PlatformSpec {
        let level = |(size_kib, ways): (u64, u32)| CacheSpec {
            size_kib,
            ways,
            line_bytes: 256,
            replacement: "lru".into(),
            relation: Relation::NonInclusive,
            write_hit_updates_recency: false,
            ..CacheSpec::default()
        };
        let mut spec = PlatformSpec { l1d: level(l1), l2: level(l2), l3: level(l3), ..PlatformSpec::default() };
        spec.topology = TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 1, threads_per_core: 1 };
        spec
    }

    fn replay_text(text: &str, platform: &PlatformSpec) -> TraceReport {
        let reader = TraceReader::new(Cursor::new(text.as_bytes().to_vec()), "t.din").unwrap();
        replay(reader, platform, 0).unwrap()
    }

    #[test]
    fn din_accepts_comments_blank_lines_and_both_address_spellings() {
        let text = "# a comment\n\n0 1f\n1 0x20 8   # trailing comment\r\n  2 0XFF 4\n3\n4 0\n\t0 DEADbeef 1\n0 10";
        let mut reader = TraceReader::new(Cursor::new(text.as_bytes().to_vec()), "t.din").unwrap();
        assert_eq!(reader.format(), TraceFormat::Din);
        let records: Vec<_> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            records,
            [
                record(AccessKind::Read, 0x1f, 1),
                record(AccessKind::Write, 0x20, 8),
                record(AccessKind::InstructionFetch, 0xff, 4),
                record(AccessKind::Read, 0xdead_beef, 1),
                record(AccessKind::Read, 0x10, 1),
            ]
        );
        assert_eq!(reader.skipped(), 2, "one escape and one flush");
        assert_eq!(read_all(b"").unwrap(), []);
    }

    #[test]
    fn malformed_din_lines_name_the_line() {
        let cases: &[(&[u8], u64, &str)] = &[
            (b"0 10\n5 10\n", 2, "unknown label `5`"),
            (b"# header\n1\n", 2, "missing address"),
            (b"0 0xzz\n", 1, "`0xzz` is not a 64-bit hexadecimal address"),
            (b"0 +ff\n", 1, "`+ff` is not"),
            (b"0 0x\n", 1, "`0x` is not"),
            (b"0 10000000000000000\n", 1, "is not a 64-bit"),
            (b"0 10 0\n", 1, "at least 1 byte"),
            (b"0 10 -4\n", 1, "`-4` is not a size"),
            (b"0 10 4 7\n", 1, "unexpected `7`"),
            (b"0 ffffffffffffffff 2\n", 1, "past the end of the address space"),
            (b"\n\n0 \xff\n", 3, "not UTF-8"),
        ];
        for &(text, line, expected) in cases {
            let error = read_all(text).unwrap_err();
            assert_eq!((error.origin.as_str(), error.line), ("t.din", Some(line)), "{error}");
            assert!(error.message.contains(expected), "`{error}` lacks `{expected}`");
            assert!(error.to_string().starts_with(&format!("t.din:{line}: ")), "{error}");
        }
    }

    /// `read_chunk` decodes plain din lines itself and leaves the others to the iterator's
    /// parser: on random lines of every form, valid or not, both read the same records and stop
    /// at the same error.
    #[test]
    fn din_chunks_read_what_the_iterator_reads() {
        // Mostly valid fields, so that lines after the first few are read too.
        let labels = ["0", "1", "2", "0", "1", "2", "3", "7", ""];
        let gaps = [" ", "\t", " ", "  "];
        let addrs = ["1f", "0x1F", "0XdeadBEEF", "ffffffffffffffff", "1f", "0x1F", "1ffffffffffffffff", "0x", "+f", "é"];
        let sizes = ["", " 8", "\t1", " 4294967295", " 00000000001", "", " 8", " 0", " 4294967296", " -4", " ", " 8 9"];
        let ends = ["\n", "\r\n", "\n", " # comment\n", "\n\n"];
        let mut rng = Rng::new(11);
        let mut pick = |options: &[&'static str]| options[(rng.next_u64() % options.len() as u64) as usize];
        for case in 0..1000 {
            let text: String = (0..8)
                .map(|_| [pick(&labels), pick(&gaps), pick(&addrs), pick(&sizes), pick(&ends)].concat())
                .collect();
            let mut iterating = TraceReader::new(Cursor::new(text.clone()), "t.din").unwrap();
            let expected: Vec<_> = iterating.by_ref().collect();
            let mut reader = TraceReader::new(Cursor::new(text.clone()), "t.din").unwrap();
            let mut records = Vec::new();
            let mut read = Vec::new();
            loop {
                let before = records.len();
                let result = reader.read_chunk(&mut records, 1 + case % 4);
                read.extend(records[before..].iter().copied().map(Ok));
                match result {
                    Err(error) => break read.push(Err(error)),
                    Ok(()) if records.len() == before => break,
                    Ok(()) => {}
                }
            }
            assert_eq!(read, expected, "{text:?}");
            assert_eq!(reader.skipped(), iterating.skipped(), "{text:?}");
        }
    }

    #[test]
    fn binary_round_trips_and_is_detected_by_its_magic() {
        let records = [
            record(AccessKind::Read, 0, 1),
            record(AccessKind::Write, BINARY_MAX_ADDR, 1),
            record(AccessKind::InstructionFetch, 0x1234, 1),
            record(AccessKind::Write, 0x40, 1),
        ];
        let mut bytes = Vec::new();
        assert_eq!(write_binary(&mut bytes, records).unwrap(), 4);
        assert_eq!(bytes.len(), 8 + 4 * 8);
        assert_eq!(&bytes[..8], BINARY_MAGIC);
        // Kind in the top two bits, little-endian.
        assert_eq!(bytes[8 + 8 + 7], 0b0111_1111);
        let reader = TraceReader::new(Cursor::new(bytes), "t.bin").unwrap();
        assert_eq!(reader.format(), TraceFormat::Binary);
        assert_eq!(reader.collect::<Result<Vec<_>, _>>().unwrap(), records);
    }

    #[test]
    fn binary_writer_keeps_only_one_line_accesses() {
        // An 8-byte aligned access touches one line on every platform: stored as one byte.
        let aligned = record(AccessKind::Read, 0x48, 8);
        assert_eq!(encode_binary(&aligned), Ok(0x48));
        let crossing = record(AccessKind::Read, 0x4c, 8);
        assert!(encode_binary(&crossing).unwrap_err().contains("split it"));
        let wide = record(AccessKind::Write, 1 << 62, 1);
        assert!(encode_binary(&wide).unwrap_err().contains("62 bits"));
        let error = write_binary(Vec::new(), [aligned, crossing]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().starts_with("record 1: "), "{error}");
    }

    #[test]
    fn truncated_or_undefined_binary_records_are_errors() {
        let mut bytes = Vec::new();
        write_binary(&mut bytes, [record(AccessKind::Read, 1, 1), record(AccessKind::Write, 2, 1)]).unwrap();
        bytes.truncate(bytes.len() - 3);
        let mut reader = TraceReader::new(Cursor::new(bytes), "t.bin").unwrap();
        assert_eq!(reader.next(), Some(Ok(record(AccessKind::Read, 1, 1))));
        let error = reader.next().unwrap().unwrap_err();
        assert_eq!(error.to_string(), "t.bin: truncated record 1 at byte 16: 5 of 8 bytes (the file was cut short)");
        assert_eq!(reader.next(), None, "nothing after an error");

        let mut bytes = BINARY_MAGIC.to_vec();
        bytes.extend_from_slice(&(3u64 << 62).to_le_bytes());
        let error = read_all(&bytes).unwrap_err();
        assert!(error.message.starts_with("record 0 at byte 8: kind 3 is not defined"), "{error}");

        // A replay reads whole blocks of records; errors name the same record.
        let mut bytes = Vec::new();
        write_binary(&mut bytes, (0..10_000).map(|i| record(AccessKind::Read, i * 8, 1))).unwrap();
        bytes.extend_from_slice(&(3u64 << 62).to_le_bytes());
        let platform = tiny((1, 1), (1, 1), (1, 1));
        let error = replay(TraceReader::new(Cursor::new(bytes), "t.bin").unwrap(), &platform, 0).unwrap_err();
        assert!(error.to_string().starts_with("t.bin: record 10000 at byte 80008: kind 3 is not defined"), "{error}");
        // Shorter than the magic: read as text.
        assert_eq!(read_all(b"1 8").unwrap(), [record(AccessKind::Write, 8, 1)]);
    }

    /// A hand-checked replay on 2-set x 2-way L1, 4 x 2 L2 and 4 x 4 L3 (256-byte lines). Lines
    /// A..E = 0, 4, 8, 12, 16 all fall in set 0 of every level. pycachesim counts the same (its
    /// LOAD = reads + writes - write_hits, HIT = read_hits, MISS, STORE = writes, EVICT = writebacks).
    #[test]
    fn replay_counts_match_a_hand_simulation() {
        let trace = "\
            1 0      # W A: misses everywhere; L1 [A*]\n\
            0 400    # R B: misses everywhere; L1 [B A*]\n\
            0 800    # R C: evicts A* from L1: L2 write miss fetches A from L3 (hit), evicting B\n\
            1 400    # W B: L1 write hit, no recency update; L1 [C B*]\n\
            0 c00    # R D: evicts B* from L1; L2 write-allocate of B evicts A* into L3 (write hit)\n\
            0 1000   # R E: misses everywhere; L3 [E B D A*]\n\
            1 800    # W C: L3 evicts A* to memory; L2 evicts B* into L3 (write hit)\n\
            0 0      # R A: misses everywhere again\n\
            0 800    # R C: L1 hit\n\
            0 1000   # R E: L3 hit\n\
            0 100    # R line 1: set 1, misses everywhere\n\
            2 4000   # instruction fetch: not modelled\n\
            3\n\
            4 0\n\
            1 1ff 2  # W spanning lines 1 (L1 hit) and 2 (miss; evicts C* into L2, fetched from L3)\n";
        let report = replay_text(trace, &tiny((1, 2), (2, 2), (4, 4)));
        let level = |reads, writes, read_hits, write_hits, misses, writebacks| LevelReport {
            counts: LevelStats { reads, writes, read_hits, write_hits, misses, writebacks, ..Default::default() },
            hits: read_hits + write_hits,
        };
        assert_eq!((report.accesses, report.skipped, report.line_ops), (12, 3, 13));
        assert_eq!(report.l1d, level(8, 5, 1, 2, 10, 3));
        assert_eq!(report.l2, level(10, 3, 0, 0, 13, 2));
        assert_eq!(report.l3, level(13, 2, 4, 2, 9, 1));
        assert_eq!(report.memory, MemoryReport { reads: 9, writes: 1 });
    }

    /// pycachesim 0.3.1's write-back, write-allocate LRU chain, counting as it does; `levels[0]`
    /// is L1 and memory lies below the last level.
    struct Reference {
        levels: Vec<ReferenceLevel>,
    }

    #[derive(Default, Debug, PartialEq)]
    struct PycachesimCounts {
        load: u64,
        store: u64,
        hit: u64,
        miss: u64,
        evict: u64,
    }

    struct ReferenceLevel {
        ways: usize,
        /// Per set, most recently used first: (line, dirty).
        sets: Vec<VecDeque<(u64, bool)>>,
        counts: PycachesimCounts,
    }

    impl Reference {
        fn new(platform: &PlatformSpec) -> Reference {
            let level = |spec: &CacheSpec| {
                let geometry = spec.geometry();
                ReferenceLevel {
                    ways: geometry.ways,
                    sets: vec![VecDeque::new(); geometry.sets],
                    counts: Default::default(),
                }
            };
            Reference { levels: vec![level(&platform.l1d), level(&platform.l2), level(&platform.l3)] }
        }

        fn load(&mut self, i: usize, line: u64) {
            let Some(level) = self.levels.get_mut(i) else { return };
            level.counts.load += 1;
            let sets = level.sets.len() as u64;
            let set = &mut level.sets[(line % sets) as usize];
            if let Some(way) = set.iter().position(|&(l, _)| l == line) {
                level.counts.hit += 1;
                let entry = set.remove(way).expect("found above");
                set.push_front(entry);
                return;
            }
            level.counts.miss += 1;
            self.load(i + 1, line);
            let level = &mut self.levels[i];
            let set = &mut level.sets[(line % sets) as usize];
            set.push_front((line, false));
            if set.len() > level.ways {
                if let Some((victim, true)) = set.pop_back() {
                    level.counts.evict += 1;
                    self.store(i + 1, victim);
                }
            }
        }

        fn store(&mut self, i: usize, line: u64) {
            let Some(level) = self.levels.get_mut(i) else { return };
            level.counts.store += 1;
            let sets = level.sets.len() as u64;
            if !level.sets[(line % sets) as usize].iter().any(|&(l, _)| l == line) {
                self.load(i, line);
            }
            // A store marks the line dirty without refreshing its recency.
            let set = &mut self.levels[i].sets[(line % sets) as usize];
            if let Some(entry) = set.iter_mut().find(|(l, _)| *l == line) {
                entry.1 = true;
            }
        }
    }

    /// The counts `LevelStats` promises to share with pycachesim.
    fn as_pycachesim(level: &LevelReport) -> PycachesimCounts {
        let c = &level.counts;
        PycachesimCounts {
            load: c.reads + c.writes - c.write_hits,
            store: c.writes,
            hit: c.read_hits,
            miss: c.misses,
            evict: c.writebacks,
        }
    }

    #[test]
    fn replays_count_like_pycachesim_on_random_traces() {
        let geometries = [((1, 2), (2, 2), (4, 4)), ((1, 1), (2, 4), (4, 2)), ((2, 4), (4, 2), (8, 8))];
        for (seed, &(l1, l2, l3)) in (0..12).zip(geometries.iter().cycle()) {
            let platform = tiny(l1, l2, l3);
            let mut rng = Rng::new(seed);
            let mut replayer = Replayer::new(&platform, 0).unwrap();
            let mut reference = Reference::new(&platform);
            for _ in 0..3000 {
                // 48 lines over caches of 4 to 32 lines: plenty of evictions at every level.
                let line = rng.next_u64() % 48;
                let write = rng.next_u64() % 5 < 2;
                let kind = if write { AccessKind::Write } else { AccessKind::Read };
                replayer.access(&record(kind, line * 256 + rng.next_u64() % 256, 1));
                if write {
                    reference.store(0, line);
                } else {
                    reference.load(0, line);
                }
            }
            let report = replayer.report(0.0);
            for (name, level, expected) in [("l1d", &report.l1d), ("l2", &report.l2), ("l3", &report.l3)]
                .into_iter()
                .zip(&reference.levels)
                .map(|((name, level), r)| (name, level, &r.counts))
            {
                assert_eq!(&as_pycachesim(level), expected, "{name}, seed {seed}, geometry {l1:?} {l2:?} {l3:?}");
            }
            let l3 = &reference.levels[2].counts;
            assert_eq!((report.memory.reads, report.memory.writes), (l3.miss, l3.evict), "memory, seed {seed}");
        }
    }

    #[test]
    fn binary_and_din_replays_agree_and_only_reads_and_writes_are_modelled() {
        let platform = tiny((1, 2), (2, 2), (4, 4));
        let mut rng = Rng::new(3);
        let records: Vec<_> = (0..500)
            .map(|_| {
                let kind =
                    [AccessKind::Read, AccessKind::Write, AccessKind::InstructionFetch][(rng.next_u64() % 3) as usize];
                record(kind, rng.next_u64() % 8192, 1)
            })
            .collect();
        let mut binary = Vec::new();
        write_binary(&mut binary, records.iter().copied()).unwrap();
        let din: String = records.iter().map(|r| format!("{} {:x}\n", r.kind.code(), r.addr)).collect();
        let from_binary = replay(TraceReader::new(Cursor::new(binary), "t.bin").unwrap(), &platform, 0).unwrap();
        let from_din = replay_text(&din, &platform);
        let fetches = records.iter().filter(|r| r.kind == AccessKind::InstructionFetch).count() as u64;
        assert_eq!(from_binary.skipped, fetches);
        assert_eq!(from_binary.accesses, 500 - fetches);
        assert_eq!(from_binary.line_ops, from_binary.accesses);
        let counts = |r: &TraceReport| (r.l1d.clone(), r.l2.clone(), r.l3.clone(), r.memory.clone(), r.skipped);
        assert_eq!(counts(&from_binary), counts(&from_din));
    }

    #[test]
    fn replay_reports_bad_files_cpus_and_platforms_in_one_line() {
        let platform = crate::platform::preset("turin-9655").unwrap();
        let error = replay_path("/nonexistent/x.din", &platform, 0).unwrap_err();
        assert!(error.to_string().starts_with("/nonexistent/x.din: cannot open: "), "{error}");
        assert!(!error.to_string().contains('\n'));

        let reader = || TraceReader::new(Cursor::new(b"0 0\n".to_vec()), "t.din").unwrap();
        let cpus = platform.topology.cpus();
        assert_eq!(replay(reader(), &platform, cpus - 1).unwrap().l1d.counts.misses, 1);
        let error = replay(reader(), &platform, cpus).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("cpu: CPU {cpus} does not exist (platform `turin-9655` has CPUs 0..{})", cpus - 1)
        );

        let mut broken = platform.clone();
        broken.l2.ways = 0;
        assert_eq!(replay(reader(), &broken, 0).unwrap_err().origin, "platform.l2.ways");
    }

    #[test]
    fn report_serializes_flat_level_counters() {
        let report = replay_text("0 0\n1 0\n", &tiny((1, 2), (2, 2), (4, 4)));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["l1d"]["hits"], 1);
        assert_eq!(json["l1d"]["write_hits"], 1);
        assert_eq!(json["l2"]["misses"], 1);
        assert_eq!(json["memory"]["reads"], 1);
        assert!(json["host_seconds"].is_number());
    }
}
