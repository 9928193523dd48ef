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

use steer_sim::error::io_reason;
use steer_sim::hierarchy::{Hierarchy, LevelStats};
use steer_sim::params::OrNone;
use steer_sim::platform::{PlatformSpec, TopologySpec};
use steer_sim::units::{Line, Time};

mod crew;
mod lru_sets;
mod mapping;
mod pass;
mod single_core;
use mapping::Mapping;
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

/// Bytes a trace is read by, and replayed from the reader's buffer: a batch of `SetGroups` on two
/// host threads in binary records (din lines take some twice as many bytes).
const READ_BLOCK: usize = 2 * single_core::BATCH_PER_THREAD * 8;

/// Bytes of a typical din line (`0 7ffd5a3c1e08 8`), to judge how many lines a text holds.
const DIN_LINE_BYTES: usize = 16;

/// Largest access one din record may describe. Real accesses are at most a few cache lines (a
/// 64-byte vector, a cache-line flush, a `rep movs` chunk); a record spanning megabytes is a
/// corrupt trace whose replay would take minutes of line accesses.
pub const MAX_RECORD_BYTES: u32 = 64 << 10;

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
    const fn code(self) -> u64 {
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
    /// Bytes read ahead (up to `READ_BLOCK` at a time) and where the next record or line starts.
    block: Vec<u8>,
    block_pos: usize,
    failed: bool,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file; errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let file =
            File::open(path).map_err(|e| TraceError::new(&origin, None, format!("cannot open: {}", io_reason(&e))))?;
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
        input.by_ref().take(BINARY_MAGIC.len() as u64).read_to_end(&mut head).map_err(|e| read_error(&origin, e))?;
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

    /// The next well-formed records of a binary trace, as read (up to a block of them), or the
    /// error of the record after the last well-formed one; `None` at the end. Replaying them from
    /// the reader's buffer saves decoding them into `TraceRecord`s.
    pub fn binary_records(&mut self) -> Result<Option<&[[u8; 8]]>, TraceError> {
        debug_assert_eq!(self.format, TraceFormat::Binary);
        if self.failed {
            return Ok(None);
        }
        if self.block.len() - self.block_pos < 8 {
            self.refill_block().map_err(|e| read_error(&self.origin, e))?;
        }
        let start = self.block_pos;
        let (records, _) = self.block[start..].as_chunks::<8>();
        let valid = first_undefined(records).unwrap_or(records.len());
        if valid == 0 {
            // The end, a record cut short or an undefined one: the iterator says which.
            return self.next().transpose().map(|_| None);
        }
        self.block_pos += valid * 8;
        self.position += valid as u64;
        Ok(Some(&self.block[start..].as_chunks::<8>().0[..valid]))
    }

    /// The next complete lines of a din trace, read ahead (some `READ_BLOCK` bytes of them; a
    /// line longer than that is an error); `None` at the end. `parse_din_text` reads them;
    /// replaying from the reader's buffer lets every host core parse a part.
    pub fn din_text(&mut self) -> Result<Option<&[u8]>, TraceError> {
        debug_assert_eq!(self.format, TraceFormat::Din);
        let read = self.refill_block().map_err(|e| read_error(&self.origin, e))?;
        let end = if read < READ_BLOCK {
            self.block.len()
        } else {
            // A whole block without a line end: no din line is that long (`/dev/zero`, say).
            let last = self.block.iter().rposition(|&byte| byte == b'\n').ok_or_else(|| too_long(&self.origin))?;
            last + 1
        };
        self.block_pos = end;
        Ok((end > 0).then(|| &self.block[..end]))
    }

    fn next_din(&mut self) -> Option<Result<TraceRecord, TraceError>> {
        loop {
            self.text.clear();
            match (&mut self.input).take(READ_BLOCK as u64).read_until(b'\n', &mut self.text) {
                Ok(0) => return None,
                Ok(READ_BLOCK) if self.text.last() != Some(&b'\n') => return Some(Err(too_long(&self.origin))),
                Ok(_) => {}
                Err(e) => return Some(Err(read_error(&self.origin, e))),
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
                return Some(Err(read_error(&self.origin, e)));
            }
        }
        let rest = &self.block[self.block_pos..];
        if rest.is_empty() {
            return None;
        }
        let index = self.position;
        self.position += 1;
        let Some(bytes) = rest.first_chunk::<8>() else {
            return Some(Err(truncated_record(&self.origin, index, rest.len())));
        };
        self.block_pos += 8;
        Some(decode_binary(u64::from_le_bytes(*bytes)).map_err(|message| bad_record(&self.origin, index, message)))
    }

    /// Keeps the unread bytes and reads up to `READ_BLOCK` more after them; returns how many
    /// were read (fewer only at the end of the trace).
    fn refill_block(&mut self) -> io::Result<usize> {
        self.block.drain(..self.block_pos);
        self.block_pos = 0;
        // `take(..).read_to_end` reads through short reads, and fills no more than it reads.
        (&mut self.input).take(READ_BLOCK as u64).read_to_end(&mut self.block)
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

/// The error of a din line longer than a read block.
fn too_long(origin: &str) -> TraceError {
    TraceError::new(
        origin,
        None,
        format!("a line longer than {} MiB: not a din trace (nor steer's binary one)", READ_BLOCK >> 20),
    )
}

/// The error of a trace that could not be read.
fn read_error(origin: &str, error: io::Error) -> TraceError {
    TraceError::new(origin, None, format!("cannot read: {}", io_reason(&error)))
}

/// Where the first record of undefined kind (code 3) is among `records`. All are checked at once
/// (the check vectorises) before one is looked for.
fn first_undefined(records: &[[u8; 8]]) -> Option<usize> {
    let undefined = |record: &[u8; 8]| record.code() == 3;
    // Code 3 sets bits 63 and 62: bit 63 of `bits & bits << 1`, gathered by a plain OR.
    let both_top_bits = |record: &[u8; 8]| u64::from_le_bytes(*record) & u64::from_le_bytes(*record) << 1;
    if records.iter().fold(0, |any, record| any | both_top_bits(record)) >> 63 == 1 {
        records.iter().position(undefined)
    } else {
        None
    }
}

/// Binary record `index` (0 is the one after the magic) as an error names it.
fn record_at(index: u64) -> String {
    format!("record {index} at byte {}", BINARY_MAGIC.len() as u64 + index * 8)
}

fn bad_record(origin: &str, index: u64, message: String) -> TraceError {
    TraceError::new(origin, None, format!("{}: {message}", record_at(index)))
}

/// The error of a binary trace whose last record has only `got` of its 8 bytes.
fn truncated_record(origin: &str, index: u64, got: usize) -> TraceError {
    TraceError::new(origin, None, format!("truncated {}: {got} of 8 bytes (the file was cut short)", record_at(index)))
}

/// Most characters of the input a message quotes.
const QUOTED_CHARS: usize = 40;

/// A field of the input as a message quotes it: characters that do not print (NULs, other control
/// characters) as `\u{..}` escapes, and at most `QUOTED_CHARS` characters of that, then `...`: a
/// message is one short readable line whatever the input holds (a binary file read as din, say).
fn quoted(field: &str) -> String {
    let mut shown = String::new();
    for c in field.chars() {
        let start = shown.len();
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
        if shown.chars().count() > QUOTED_CHARS {
            shown.truncate(start);
            shown.push_str("...");
            break;
        }
    }
    shown
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
                "unknown label `{}` (expected 0 read, 1 write, 2 instruction fetch, 3 escape or 4 flush)",
                quoted(other)
            ))
        }
    };
    let addr_text = fields.next().ok_or("missing address after the label")?;
    let addr =
        parse_hex(addr_text).ok_or_else(|| format!("`{}` is not a 64-bit hexadecimal address", quoted(addr_text)))?;
    let size = match fields.next() {
        None => 1,
        Some(size_text) => match parse_decimal(size_text) {
            Some(0) => return Err("the size must be at least 1 byte".into()),
            Some(size) if size > MAX_RECORD_BYTES => {
                return Err(format!(
                    "a {size}-byte access would replay as {} line accesses; a record may span at most {} KiB \
                     (no instruction accesses more: the trace is corrupt)",
                    (size as u64).div_ceil(64),
                    MAX_RECORD_BYTES >> 10
                ))
            }
            Some(size) => size,
            None => {
                return Err(format!("`{}` is not a size in bytes (a decimal number up to 2^32-1)", quoted(size_text)))
            }
        },
    };
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected `{}` after the size (expected LABEL ADDRESS [SIZE])", quoted(extra)));
    }
    if addr.checked_add(size as u64 - 1).is_none() {
        return Err(format!("a {size}-byte access at {addr:#x} runs past the end of the address space"));
    }
    Ok(DinLine::Access(TraceRecord { kind, addr, size }))
}

/// What a stretch of din text held, besides its accesses (see `parse_din_text`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct DinCounts {
    /// Lines of any kind.
    lines: u64,
    /// Escape and flush records.
    skipped: u64,
}

/// What din text held besides its accesses, or its first line that is not din: the line's byte
/// offset in the text and what is wrong with it.
type DinParsed = Result<DinCounts, (usize, String)>;

/// Parses complete din lines, handing each access to `each` in order, up to the first line that
/// is not din.
fn parse_din_text(text: &[u8], mut each: impl FnMut(TraceRecord)) -> DinParsed {
    let mut counts = DinCounts::default();
    let mut offset = 0;
    while offset < text.len() {
        let rest = &text[offset..];
        // Most lines are plain; the general parser takes the rest and explains errors.
        let length = match parse_plain_din_prefix(rest) {
            Some((record, length)) => {
                each(record);
                length
            }
            None => {
                let line = &rest[..rest.iter().position(|&byte| byte == b'\n').map_or(rest.len(), |at| at + 1)];
                match parse_din_line(line) {
                    Ok(DinLine::Access(record)) => each(record),
                    Ok(DinLine::Skipped) => counts.skipped += 1,
                    Ok(DinLine::Empty) => {}
                    Err(message) => return Err((offset, message)),
                }
                line.len()
            }
        };
        counts.lines += 1;
        offset += length;
    }
    Ok(counts)
}

/// The error of the line `offset` bytes into `text`, which follows `lines_before` lines.
fn din_error(origin: &str, lines_before: u64, text: &[u8], (offset, message): (usize, String)) -> TraceError {
    let line = lines_before + text[..offset].iter().filter(|&&byte| byte == b'\n').count() as u64 + 1;
    TraceError::new(origin, Some(line), message)
}

/// `text` cut after line ends into at most `parts` consecutive parts of about equal length, each
/// with its byte offset in `text`.
fn split_lines(text: &[u8], parts: usize) -> Vec<(usize, &[u8])> {
    let mut cuts = vec![0];
    for k in 1..parts {
        let from = (text.len() * k / parts).max(*cuts.last().expect("starts with 0"));
        let cut = text[from..].iter().position(|&byte| byte == b'\n').map_or(text.len(), |at| from + at + 1);
        cuts.push(cut);
    }
    cuts.push(text.len());
    cuts.dedup();
    cuts.windows(2).map(|cut| (cut[0], &text[cut[0]..cut[1]])).collect()
}

/// A din line (without its `\n`) of the plain form: a read, write or instruction fetch label, one
/// space or tab, a hexadecimal address of at most 16 digits, optionally one space or tab and a
/// decimal size of at most 10 digits, optionally `\r`. Its record is the one `parse_din_line`
/// returns; any other line (comments, blank lines, other labels, errors) is `None`, left to it.
#[cfg(test)]
fn parse_plain_din_line(line: &[u8]) -> Option<TraceRecord> {
    parse_plain_din_prefix(line).filter(|&(_, length)| length == line.len()).map(|(record, _)| record)
}

/// The value of each byte as a hexadecimal digit, `NOT_HEX` for the others.
const HEX_DIGITS: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = match byte as u8 {
            digit @ b'0'..=b'9' => digit - b'0',
            letter @ b'a'..=b'f' => letter - b'a' + 10,
            letter @ b'A'..=b'F' => letter - b'A' + 10,
            _ => NOT_HEX,
        };
        byte += 1;
    }
    table
};
const NOT_HEX: u8 = 0xFF;

/// The plain din line (see `parse_plain_din_line`) that `text` starts with, and its length with
/// its `\n` (the whole of `text` if it has none), read in one pass: this runs once per line of a
/// din trace, and splitting the text into lines first, then each line into fields, read every
/// byte three times.
#[inline(always)]
fn parse_plain_din_prefix(text: &[u8]) -> Option<(TraceRecord, usize)> {
    let kind = match text.first()? {
        b'0' => AccessKind::Read,
        b'1' => AccessKind::Write,
        b'2' => AccessKind::InstructionFetch,
        _ => return None,
    };
    let [b' ' | b'\t', ..] = text.get(1..)? else { return None };
    let mut at = 2;
    if text.get(at) == Some(&b'0') && matches!(text.get(at + 1), Some(b'x' | b'X')) {
        at += 2;
    }
    let digits_from = at;
    let mut addr = 0u64;
    while let Some(&digit) = text.get(at) {
        let nibble = HEX_DIGITS[digit as usize];
        if nibble == NOT_HEX {
            break;
        }
        addr = addr << 4 | nibble as u64;
        at += 1;
    }
    if !(1..=16).contains(&(at - digits_from)) {
        return None;
    }
    let mut size = 1;
    if let Some(b' ' | b'\t') = text.get(at) {
        at += 1;
        let digits_from = at;
        let mut value = 0u64;
        while let Some(&digit) = text.get(at).filter(|digit| digit.is_ascii_digit()) {
            value = value * 10 + (digit - b'0') as u64;
            at += 1;
            if at - digits_from > 10 {
                return None;
            }
        }
        if at == digits_from {
            return None;
        }
        size = u32::try_from(value).ok().filter(|&size| size > 0 && size <= MAX_RECORD_BYTES)?;
    }
    if text.get(at) == Some(&b'\r') {
        at += 1;
    }
    match text.get(at) {
        None => {}
        Some(b'\n') => at += 1,
        Some(_) => return None,
    }
    addr.checked_add(size as u64 - 1)?;
    Some((TraceRecord { kind, addr, size }, at))
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
    /// Lines read from memory: the L3's read misses, a non-inclusive L3's write misses
    /// (write-allocate) and the L3's own prefetches.
    pub reads: u64,
    /// Lines written to memory: the L3's writebacks.
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
            // An L3 rinses at a rate in time, and a trace has none: its 1 ns steps would make the
            // counts depend on them (`SingleCore` does not rinse either).
            one_core.l3.rinse_gbs = OrNone(None);
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
        self.count_replayed(replayed, records.len() as u64);
    }

    /// Counts `replayed` of `records` records as accesses, the others as skipped instruction
    /// fetches.
    fn count_replayed(&mut self, replayed: u64, records: u64) {
        self.accesses += replayed;
        self.skipped += records - replayed;
    }

    /// Replays every record `reader` reads.
    /// Replays what `reader` reads; `progress(bytes replayed)` is called after each block read and
    /// stops the replay when it returns false.
    fn replay_reader<R: BufRead>(&mut self, mut reader: TraceReader<R>, progress: Progress) -> Result<(), TraceError> {
        let origin = reader.origin.clone();
        let mut done = BINARY_MAGIC.len() as u64;
        if reader.format() == TraceFormat::Binary {
            while let Some(records) = reader.binary_records()? {
                self.replay_all(records);
                done += 8 * records.len() as u64;
                continue_or_stop(progress, done, &origin)?;
            }
        } else {
            done = 0;
            // Lines before the text being replayed, for errors.
            let mut lines = 0;
            while let Some(text) = reader.din_text()? {
                let counts = self.replay_din(text).map_err(|bad| din_error(&origin, lines, text, bad))?;
                lines += counts.lines;
                done += text.len() as u64;
                continue_or_stop(progress, done, &origin)?;
            }
        }
        Ok(())
    }

    /// Replays complete din lines (see `TraceReader::din_text`), in parts shared between the host
    /// threads if the engine shares them; stops at the first line that is not din, as `parse_din_text`
    /// does, returning its offset in `text` and what is wrong with it.
    fn replay_din(&mut self, text: &[u8]) -> DinParsed {
        let line_bits = self.line_bits;
        let parts = match &mut self.caches {
            Caches::SingleCore(groups) => {
                let parts = split_lines(text, groups.parts_for(text.len() / DIN_LINE_BYTES));
                groups.replay_parts(parts, |(offset, part), sorter| (offset, replay_din_part(sorter, part, line_bits)))
            }
            Caches::General(general) => vec![(0, replay_din_part(general.as_mut(), text, line_bits))],
        };
        let mut total = DinCounts::default();
        for (offset, (parsed, replayed, fetches)) in parts {
            self.accesses += replayed;
            self.skipped += fetches;
            let counts = parsed.map_err(|(at, message)| (offset + at, message))?;
            total.lines += counts.lines;
            total.skipped += counts.skipped;
        }
        self.skipped += total.skipped;
        Ok(total)
    }

    /// The counters so far; `host_seconds` is the caller's measurement.
    pub fn report(&self, host_seconds: f64) -> TraceReport {
        let (line_ops, [l1d, l2, l3], memory) = match &self.caches {
            Caches::SingleCore(caches) => {
                let (reads, writes) = caches.memory_lines();
                (caches.line_ops(), caches.level_stats(), MemoryReport { reads, writes })
            }
            Caches::General(general) => {
                let (levels, memory) = chain_counts(&general.hierarchy, self.line_bytes);
                (general.hierarchy.stats.line_ops, levels, memory)
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

/// A hierarchy's counters as a replay reports them (docs/trace-format.md): its level counters
/// plus the writes to the level below that a chain of caches counts and they leave out
/// (`ChainWrites`), and the lines the caches read from memory (those its controller answered
/// from the write queue included) and wrote to it.
pub fn chain_counts(hierarchy: &Hierarchy, line_bytes: u64) -> ([LevelStats; 3], MemoryReport) {
    let stats = &hierarchy.stats;
    let chain = &stats.chain_writes;
    let mut l2 = stats.l2.clone();
    l2.writebacks += chain.l2_dirty_l1_copies;
    let mut l3 = stats.l3.clone();
    l3.writes += chain.l3_write_hits + chain.l3_write_misses;
    l3.write_hits += chain.l3_write_hits;
    l3.misses += chain.l3_write_misses;
    let memory = hierarchy.memory.stats().fold(MemoryReport { reads: 0, writes: 0 }, |sum, channel| MemoryReport {
        reads: sum.reads + channel.reads + channel.write_queue_reads,
        writes: sum.writes + channel.write_bytes / line_bytes,
    });
    ([stats.l1d.clone(), l2, l3], memory)
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
        replayed += replay_record(caches, record, line_bits) as u64;
    }
    replayed
}

/// Replays the lines one record touches, in address order; false for an instruction fetch, which
/// is not modelled.
#[inline(always)]
fn replay_record(caches: &mut impl LineSink, record: impl Record, line_bits: u32) -> bool {
    // Comparisons, not a match: reads and writes mix unpredictably in most traces.
    let code = record.code();
    if code == AccessKind::InstructionFetch.code() {
        return false;
    }
    let write = code == AccessKind::Write.code();
    let last = record.addr().saturating_add(record.size().max(1) as u64 - 1) >> line_bits;
    let mut line = record.addr() >> line_bits;
    // Not a `..=` range: its iterator costs more than an access that hits.
    loop {
        caches.access(line, write);
        if line == last {
            return true;
        }
        line += 1;
    }
}

/// Parses a part of din text and replays its accesses: what `parse_din_text` returned, then how
/// many accesses were replayed and how many were instruction fetches.
fn replay_din_part(caches: &mut impl LineSink, text: &[u8], line_bits: u32) -> (DinParsed, u64, u64) {
    let (mut replayed, mut fetches) = (0, 0);
    let parsed = parse_din_text(text, |record| {
        if replay_record(caches, record, line_bits) {
            replayed += 1;
        } else {
            fetches += 1;
        }
    });
    (parsed, replayed, fetches)
}

/// Called with the bytes of the trace replayed so far; returning false stops the replay.
pub type Progress<'a> = &'a mut dyn FnMut(u64) -> bool;

/// The message of the error a replay stopped by its progress callback ends with.
pub const STOPPED: &str = "replay stopped";

fn continue_or_stop(progress: Progress, done: u64, origin: &str) -> Result<(), TraceError> {
    if progress(done) {
        Ok(())
    } else {
        Err(TraceError::new(origin, None, STOPPED))
    }
}

/// Replays a whole trace on logical CPU `cpu` of `platform`, from empty caches.
pub fn replay<R: BufRead>(
    reader: TraceReader<R>,
    platform: &PlatformSpec,
    cpu: u32,
) -> Result<TraceReport, TraceError> {
    let start = Instant::now();
    let mut replayer = Replayer::new(platform, cpu)?;
    replayer.replay_reader(reader, &mut |_| true)?;
    Ok(replayer.report(start.elapsed().as_secs_f64()))
}

/// Opens a trace file (either format), or standard input for `-`, and replays it as `replay`
/// does; errors name the file (or `stdin`).
///
/// A binary trace in a regular file replayed by `SetGroups` is read by every host thread, each
/// the parts of a batch it takes, at their place in the file: one thread copying the whole file would leave
/// the others waiting (a 16 MB trace takes some 2 ms to copy, a tenth of its replay).
pub fn replay_path(path: impl AsRef<Path>, platform: &PlatformSpec, cpu: u32) -> Result<TraceReport, TraceError> {
    replay_path_with(path, platform, cpu, &mut |_| true)
}

/// The path that names standard input (`steer trace -`): read as a stream, never mapped.
pub const STDIN_PATH: &str = "-";

/// `replay_path` reporting its progress: `progress(bytes of the file replayed)` is called after each
/// block, and the replay stops with the error [`STOPPED`] when it returns false.
pub fn replay_path_with(
    path: impl AsRef<Path>,
    platform: &PlatformSpec,
    cpu: u32,
    progress: Progress,
) -> Result<TraceReport, TraceError> {
    let start = Instant::now();
    if path.as_ref() == Path::new(STDIN_PATH) {
        let reader = TraceReader::new(io::stdin().lock(), "stdin")?;
        let mut replayer = Replayer::new(platform, cpu)?;
        replayer.replay_reader(reader, progress)?;
        return Ok(replayer.report(start.elapsed().as_secs_f64()));
    }
    let reader = TraceReader::open(path)?;
    let mut replayer = Replayer::new(platform, cpu)?;
    // A binary file is sorted straight from memory where it can be mapped; the rest is read.
    let file = reader.input.get_ref().1.get_ref();
    let mapping = match replayer.caches {
        Caches::SingleCore(_) if reader.format() == TraceFormat::Binary => Mapping::of_file(file).ok(),
        _ => None,
    };
    match (&mut replayer.caches, mapping) {
        (Caches::SingleCore(groups), Some(mapping)) => {
            let (replayed, records) =
                replay_binary_file(groups, mapping.bytes(), &reader.origin, replayer.line_bits, progress)?;
            replayer.count_replayed(replayed, records);
        }
        _ => replayer.replay_reader(reader, progress)?,
    }
    Ok(replayer.report(start.elapsed().as_secs_f64()))
}

/// Replays the records of a binary trace file after its magic, given as its bytes mapped into
/// memory (`Mapping`), a batch at a time, each part of a batch sorted by a host thread; returns
/// how many accesses were replayed and how many records there were (the others are instruction
/// fetches). Errors are the reader's: the first undefined or cut-short record.
fn replay_binary_file(
    groups: &mut SetGroups,
    file: &[u8],
    origin: &str,
    line_bits: u32,
    progress: Progress,
) -> Result<(u64, u64), TraceError> {
    let (all, cut_short) = file[BINARY_MAGIC.len().min(file.len())..].as_chunks::<8>();
    let mut replayed = 0;
    let batch_len = groups.batch();
    for (index, batch) in all.chunks(batch_len).enumerate() {
        let first = index * batch_len;
        let part = batch.len().div_ceil(groups.parts_for(batch.len()));
        let parts = batch.chunks(part).enumerate().map(|(index, records)| (first + index * part, records));
        let results = groups.replay_parts(parts.collect(), |(first, records), sorter| {
            sorter.sort_binary(records, line_bits).map_err(|bad| {
                let message = decode_binary(u64::from_le_bytes(records[bad])).expect_err("an undefined kind");
                bad_record(origin, (first + bad) as u64, message)
            })
        });
        for result in results {
            replayed += result?;
        }
        continue_or_stop(progress, (BINARY_MAGIC.len() + 8 * (first + batch.len())) as u64, origin)?;
    }
    let records = all.len() as u64;
    match cut_short.len() {
        0 => Ok((replayed, records)),
        got => Err(truncated_record(origin, records, got)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::Cursor;

    use super::*;
    use steer_sim::platform::{CacheSpec, Relation};
    use steer_sim::units::Rng;

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
        // A replay skips them and the instruction fetch.
        let report = replay_text(text, &tiny((1, 1), (1, 1), (1, 1)));
        assert_eq!((report.accesses, report.skipped), (4, 3));
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
            (
                b"0 10 65537\n",
                1,
                "a 65537-byte access would replay as 1025 line accesses; a record may span at most 64 KiB",
            ),
            (b"0 10 4294967295\n", 1, "a 4294967295-byte access"),
            (b"0 10 -4\n", 1, "`-4` is not a size"),
            (b"0 10 +4\n", 1, "`+4` is not a size"),
            (b"0 10 4 7\n", 1, "unexpected `7`"),
            (b"0 ffffffffffffffff 2\n", 1, "past the end of the address space"),
            (b"\n\n0 \xff\n", 3, "not UTF-8"),
            // Bytes that do not print are escaped, and a long field is cut short.
            (b"\0\0\x07 10\n", 1, "unknown label `\\u{0}\\u{0}\\u{7}` (expected"),
            (b"0 10\x1b[31m\n", 1, "`10\\u{1b}[31m` is not a 64-bit"),
            (b"0 10 4\x7f\n", 1, "`4\\u{7f}` is not a size"),
            (
                b"STEERTR2\0\x01\0\0\0\0\0\x40STEERTR2STEERTR2STEERTR2STEERTR2STEERTR2 x\n",
                1,
                "unknown label `STEERTR2\\u{0}\\u{1}\\u{0}\\u{0}\\u{0}\\u{0}...` (",
            ),
        ];
        for &(text, line, expected) in cases {
            let error = read_all(text).unwrap_err();
            assert_eq!((error.origin.as_str(), error.line), ("t.din", Some(line)), "{error}");
            assert!(error.message.contains(expected), "`{error}` lacks `{expected}`");
            assert!(error.to_string().starts_with(&format!("t.din:{line}: ")), "{error}");
        }
    }

    /// The fast parser takes every plain line, as the general one reads it, and leaves the rest.
    #[test]
    fn plain_din_lines_take_the_fast_path() {
        let plain: &[&[u8]] = &[
            b"0 1f",
            b"1\t0x20 8",
            b"2 0XFF\t4\r",
            b"0 ffffffffffffffc0 64",
            b"1 0 65536",
            b"0 DEADbeef 0000000001",
            b"0 1f\r",
        ];
        for &line in plain {
            let Ok(DinLine::Access(general)) = parse_din_line(line) else { panic!("{line:?} is not an access") };
            assert_eq!(parse_plain_din_line(line), Some(general), "{line:?}");
        }
        let others: &[&[u8]] = &[
            b"# comment",
            b"",
            b"3",
            b"4 0",
            b" 0 1f",
            b"0  1f",
            b"0 1f 8 # comment",
            b"0 1f 65537",
            b"0 1f 0",
            b"0 0x",
            b"0 10000000000000000",
            b"0 1f 10000000000",
            b"0 1f 18446744073709551624",
            b"0 ffffffffffffffff 2",
            b"0 1f ",
            b"0 1g 8",
            b"0 1f\r 8",
            b"0 1f\r\r",
        ];
        for &line in others {
            assert_eq!(parse_plain_din_line(line), None, "{line:?}");
        }
    }

    /// `din_text` hands out whole lines, `parse_din_text` takes plain ones itself and the others
    /// through `parse_din_line`: together they read what the iterator reads, errors included.
    #[test]
    fn din_text_parses_what_the_iterator_reads() {
        // Mostly valid fields, so that lines after the first few are read too.
        let labels = ["0", "1", "2", "0", "1", "2", "3", "7", ""];
        let gaps = [" ", "\t", " ", "  "];
        let addrs =
            ["1f", "0x1F", "0XdeadBEEF", "ffffffffffffffff", "1f", "0x1F", "1ffffffffffffffff", "0x", "+f", "é"];
        let sizes = ["", " 8", "\t1", " 4294967295", " 00000000001", "", " 8", " 0", " 4294967296", " -4", " ", " 8 9"];
        let ends = ["\n", "\r\n", "\n", " # comment\n", "\n\n"];
        let mut rng = Rng::new(11);
        let mut pick = |options: &[&'static str]| options[(rng.next_u64() % options.len() as u64) as usize];
        for _ in 0..1000 {
            let mut text: String = (0..8)
                .map(|_| [pick(&labels), pick(&gaps), pick(&addrs), pick(&sizes), pick(&ends)].concat())
                .collect();
            if pick(&["cut", "whole"]) == "cut" {
                text.pop();
            }
            let mut iterating = TraceReader::new(Cursor::new(text.clone()), "t.din").unwrap();
            let expected: Vec<_> = iterating.by_ref().collect();
            let mut reader = TraceReader::new(Cursor::new(text.clone()), "t.din").unwrap();
            let mut read = Vec::new();
            let mut skipped = 0;
            let mut lines = 0;
            while let Some(block) = reader.din_text().unwrap() {
                match parse_din_text(block, |record| read.push(Ok(record))) {
                    Ok(counts) => (lines, skipped) = (lines + counts.lines, skipped + counts.skipped),
                    Err(bad) => {
                        read.push(Err(din_error("t.din", lines, block, bad)));
                        break;
                    }
                }
            }
            assert_eq!(read, expected, "{text:?}");
            if !read.last().is_some_and(Result::is_err) {
                assert_eq!(skipped, iterating.skipped(), "{text:?}");
            }
        }
    }

    /// A line of more than a block (NUL bytes from `/dev/zero`, say) is an error, read either way;
    /// lines that fill a block exactly, or end the trace unterminated, are read.
    #[test]
    fn a_line_longer_than_a_block_is_not_din() {
        let expected = "t.din: a line longer than 2 MiB: not a din trace (nor steer's binary one)";
        let text = [b"0 1f\n".as_slice(), &vec![0; 2 * READ_BLOCK]].concat();
        let mut reader = TraceReader::new(Cursor::new(text.clone()), "t.din").unwrap();
        assert_eq!(reader.din_text().unwrap(), Some(b"0 1f\n".as_slice()));
        assert_eq!(reader.din_text().map_err(|e| e.to_string()), Err(expected.to_string()));
        let mut iterating = TraceReader::new(Cursor::new(text), "t.din").unwrap();
        assert!(iterating.next().unwrap().is_ok());
        assert_eq!(iterating.next().unwrap().map_err(|e| e.to_string()), Err(expected.to_string()));
        // A block's worth of text ending in a line end, then a last line without one.
        let spaces = " ".repeat(READ_BLOCK - 5);
        let text = format!("{spaces}0 1f\n0 2f");
        let mut reader = TraceReader::new(Cursor::new(text.clone()), "t.din").unwrap();
        assert_eq!(reader.din_text().unwrap().map(<[u8]>::len), Some(READ_BLOCK));
        assert_eq!(reader.din_text().unwrap(), Some(b"0 2f".as_slice()));
        assert_eq!(reader.din_text().unwrap(), None);
        let records: Vec<_> = TraceReader::new(Cursor::new(text), "t.din").unwrap().collect();
        assert_eq!(records.len(), 2);
        assert!(records.iter().all(Result::is_ok));
    }

    /// Text cut into parts at line ends: the parts are the whole text in order, and each but the
    /// last ends a line.
    #[test]
    fn din_text_splits_at_line_ends() {
        let text = b"0 1\n1 22\n\n0 333 4\n# x\n2 5";
        for parts in 1..12 {
            let split = split_lines(text, parts);
            assert!(split.len() <= parts);
            let joined: Vec<u8> = split.iter().flat_map(|(_, part)| part.iter().copied()).collect();
            assert_eq!(joined, text, "{parts} parts");
            for (i, &(offset, part)) in split.iter().enumerate() {
                assert_eq!(&text[offset..offset + part.len()], part);
                assert!(i + 1 == split.len() || part.ends_with(b"\n"), "{parts} parts: {part:?}");
            }
        }
        assert!(split_lines(b"", 2).is_empty());
        // About equal parts: each cut at the first line end at or after its share of the bytes.
        let text = b"0 10\n".repeat(100);
        let lengths: Vec<usize> = split_lines(&text, 4).iter().map(|(_, part)| part.len()).collect();
        assert_eq!(lengths, [130, 125, 125, 120]);
        let lengths: Vec<usize> = split_lines(&text, 3).iter().map(|(_, part)| part.len()).collect();
        assert_eq!(lengths, [170, 165, 165]);
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
        // Two undefined records in one block: the first is named (their top bits do not cancel).
        let mut bytes = Vec::new();
        write_binary(&mut bytes, (0..10).map(|i| record(AccessKind::Write, i * 8, 1))).unwrap();
        bytes.extend_from_slice(&(3u64 << 62).to_le_bytes());
        bytes.extend_from_slice(&(3u64 << 62 | 8).to_le_bytes());
        let error = replay(TraceReader::new(Cursor::new(bytes), "t.bin").unwrap(), &platform, 0).unwrap_err();
        assert!(error.to_string().starts_with("t.bin: record 10 at byte 88: kind 3 is not defined"), "{error}");
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
        // Enough lines for din text to be parsed in parts on a host with more than one core.
        let records: Vec<_> = (0..20_000)
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
        assert_eq!(from_binary.accesses, 20_000 - fetches);
        assert_eq!(from_binary.line_ops, from_binary.accesses);
        let counts = |r: &TraceReport| (r.l1d.clone(), r.l2.clone(), r.l3.clone(), r.memory.clone(), r.skipped);
        assert_eq!(counts(&from_binary), counts(&from_din));

        // A bad line late in the text is reported with its number, whichever part holds it.
        let mut lines: Vec<_> = din.lines().collect();
        lines[14_999] = "0 xyz";
        let text = lines.join("\n");
        let error = replay(TraceReader::new(Cursor::new(text), "t.din").unwrap(), &platform, 0).unwrap_err();
        assert_eq!(error.to_string(), "t.din:15000: `xyz` is not a 64-bit hexadecimal address");
    }

    /// Traces longer than a read block: the iterator reads every binary record, and a bad din
    /// line in a later block is named by its number in the whole trace, read either way.
    #[test]
    fn traces_longer_than_a_block_read_whole_and_count_lines_across_blocks() {
        let records = (0..READ_BLOCK as u64 / 8 * 5 / 2).map(|i| record(AccessKind::Write, i * 8, 1));
        let mut binary = Vec::new();
        write_binary(&mut binary, records.clone()).unwrap();
        let read: Vec<_> = TraceReader::new(Cursor::new(binary), "t.bin").unwrap().map(Result::unwrap).collect();
        assert!(read.iter().copied().eq(records));

        let lines = READ_BLOCK / 5 * 5 / 2;
        let text = format!("{}0 xyz\n0 1f\n", "0 1f\n".repeat(lines));
        let expected = format!("t.din:{}: `xyz` is not a 64-bit hexadecimal address", lines + 1);
        let error = read_all(text.as_bytes()).unwrap_err();
        assert_eq!(error.to_string(), expected);
        let platform = tiny((1, 1), (1, 1), (1, 1));
        let error = replay(TraceReader::new(Cursor::new(text), "t.din").unwrap(), &platform, 0).unwrap_err();
        assert_eq!(error.to_string(), expected);
    }

    /// A binary trace file, mapped into memory and sorted in parts on every host thread, counts
    /// as the same bytes streamed, and fails with the same errors.
    #[test]
    fn binary_files_replay_as_streamed_bytes() {
        let platform = tiny((1, 2), (2, 2), (4, 4));
        let mut rng = Rng::new(5);
        // A full batch and a shorter one, so every host thread reads parts of both.
        let batch = SetGroups::new(&platform).batch();
        let records = (0..batch as u64 * 3 / 2 + 12_345).map(|_| {
            let kind =
                [AccessKind::Read, AccessKind::Write, AccessKind::InstructionFetch][(rng.next_u64() % 3) as usize];
            record(kind, rng.next_u64() % 65_536, 1)
        });
        let mut bytes = Vec::new();
        write_binary(&mut bytes, records).unwrap();
        let path = std::env::temp_dir().join(format!("steer-binary-file-{}.trace", std::process::id()));
        let both = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let from_file = replay_path(&path, &platform, 0).map_err(|e| e.message);
            let streamed = replay(TraceReader::new(Cursor::new(bytes.to_vec()), "t").unwrap(), &platform, 0);
            (from_file, streamed.map_err(|e| e.message))
        };
        let counts = |r: TraceReport| (r.accesses, r.skipped, r.line_ops, r.l1d, r.l2, r.l3, r.memory);
        let (from_file, streamed) = both(&bytes);
        assert_eq!(from_file.map(counts), streamed.map(counts));

        // An undefined record in the second part of the second batch, then one cut short.
        let bad = batch + batch / 2 + 7;
        let mut undefined = bytes.clone();
        undefined[8 + bad * 8 + 7] |= 0xc0;
        let (from_file, streamed) = both(&undefined);
        let expected = format!("record {bad} at byte {}: kind 3 is not defined", 8 + bad * 8);
        assert!(from_file.as_ref().is_err_and(|e| e.starts_with(&expected)), "{from_file:?}");
        assert_eq!(from_file.unwrap_err(), streamed.unwrap_err());
        // Undefined records of every bit set, first in the file and right after a read of the
        // line of their address (all ones, too): none passes for a repeat.
        for bad in [0, 1001] {
            let mut undefined = bytes.clone();
            let read_before = (u64::MAX >> 2).to_le_bytes();
            undefined[8 + (bad.max(1) - 1) * 8..][..8].copy_from_slice(&read_before);
            undefined[8 + bad * 8..][..8].copy_from_slice(&[0xff; 8]);
            let (from_file, streamed) = both(&undefined);
            let expected = format!("record {bad} at byte {}: kind 3 is not defined", 8 + bad * 8);
            assert!(from_file.as_ref().is_err_and(|e| e.starts_with(&expected)), "{from_file:?}");
            assert_eq!(from_file.unwrap_err(), streamed.unwrap_err());
        }
        bytes.extend_from_slice(&[0; 3]);
        let (from_file, streamed) = both(&bytes);
        let expected = ": 3 of 8 bytes (the file was cut short)";
        assert!(from_file.as_ref().is_err_and(|e| e.starts_with("truncated record ") && e.ends_with(expected)));
        assert_eq!(from_file.unwrap_err(), streamed.unwrap_err());
        std::fs::remove_file(&path).unwrap();
    }

    /// Progress is the bytes of the file replayed, after each block (a batch of a mapped binary
    /// file, a block read otherwise), ending at the file's length; returning false stops it.
    #[test]
    fn progress_counts_the_bytes_replayed_and_stops_the_replay() {
        let single = tiny((1, 2), (2, 2), (4, 4));
        let mut general = single.clone();
        general.l1d.prefetcher.kind = steer_sim::params::Name::new("next_line");
        let batch = SetGroups::new(&single).batch();
        let records = batch * 3 / 2 + 5;
        let mut bytes = Vec::new();
        write_binary(&mut bytes, (0..records as u64).map(|i| record(AccessKind::Read, i * 8 % 65_536, 1))).unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let path = std::env::temp_dir().join(format!("steer-progress-{}-{name}", std::process::id()));
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let binary = file("t.bin", &bytes);
        let din_text: String = (0..320_000).map(|i| format!("0 {:x}\n", i * 64 % 65_536)).collect();
        let din = file("t.din", din_text.as_bytes());
        assert!(din_text.len() > READ_BLOCK);
        for (path, platform, len) in
            [(&binary, &single, bytes.len()), (&binary, &general, bytes.len()), (&din, &single, din_text.len())]
        {
            let mut seen = Vec::new();
            replay_path_with(path, platform, 0, &mut |done| {
                seen.push(done);
                true
            })
            .unwrap();
            assert!(seen.len() >= 2 && seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
            assert_eq!(*seen.last().unwrap(), len as u64);
            let mut calls = 0;
            let stopped = replay_path_with(path, platform, 0, &mut |_| {
                calls += 1;
                false
            })
            .unwrap_err();
            assert_eq!((calls, stopped.message.as_str()), (1, STOPPED));
        }
        // A mapped file reports each batch of records.
        let mut seen = Vec::new();
        replay_path_with(&binary, &single, 0, &mut |done| {
            seen.push(done);
            true
        })
        .unwrap();
        assert_eq!(seen, vec![8 + 8 * batch as u64, 8 + 8 * records as u64]);
        std::fs::remove_file(&binary).unwrap();
        std::fs::remove_file(&din).unwrap();
    }

    #[test]
    fn replay_reports_bad_files_cpus_and_platforms_in_one_line() {
        let platform = steer_sim::platform::preset("turin-9655").unwrap();
        let error = replay_path("/nonexistent/x.din", &platform, 0).unwrap_err();
        assert_eq!(error.to_string(), "/nonexistent/x.din: cannot open: No such file or directory");
        let directory = std::env::temp_dir();
        let error = replay_path(&directory, &platform, 0).unwrap_err();
        assert_eq!(error.to_string(), format!("{}: cannot read: Is a directory", directory.display()));
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
