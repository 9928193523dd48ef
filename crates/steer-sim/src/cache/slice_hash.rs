//! How a sliced cache (Intel's LLC: one slice per CHA) assigns a line to a slice.
//!
//! Intel does not document its slice hashes. McCalpin measured them with uncore counters
//! ("Mapping Addresses to L3/CHA Slices in Intel Processors", TACC ACELab TR-2021-03, 2021; data
//! files in github.com/jdmccalpin/Intel_Address_Hash, `Results/`): a short *base sequence* of
//! slice numbers for the lines from physical address 0, repeated for each following block with its
//! index XOR-ed by a permutation whose bit i is the parity of the address under *select mask* i.
//! `skylake_sp` is that measurement for Skylake-SP and Cascade Lake-SP with 18 slices (the Xeon
//! Gold 6140 of `skylake-sp-6140`). It treats the model's addresses as physical ones; which lines
//! conflict then depends on where buffers lie, as on the real part (McCalpin finds severe L3 and
//! snoop-filter conflicts on some combinations of 2 MiB pages). `uniform` spreads lines over the
//! slices pseudo-randomly, as an average over placements would.

use crate::params::choice;
use crate::units::Line;

choice! {
    /// The function from a line's address to its slice.
    pub enum SliceHash {
        /// A pseudo-random slice per line, the same every run: no placement is favoured.
        Uniform,
        /// McCalpin's measured hash of Skylake-SP / Cascade Lake-SP with 18 slices (64 B lines,
        /// physical addresses below 256 GiB).
        SkylakeSp,
    }
}

impl SliceHash {
    /// Whether this hash can serve a cache of `slices` slices of `line_bytes` B lines (any hash
    /// serves an unsliced cache, which never asks it).
    pub fn check(self, slices: u32, line_bytes: u32) -> Result<(), String> {
        match self {
            SliceHash::SkylakeSp if slices > 1 && (slices != SKYLAKE_SP_SLICES || line_bytes != 64) => Err(format!(
                "the measured Skylake-SP hash covers {SKYLAKE_SP_SLICES} slices of 64 B lines \
                 (got {slices} slices of {line_bytes} B)"
            )),
            _ => Ok(()),
        }
    }

    /// The slice of `slices` that `line` belongs to.
    #[inline]
    pub fn slice_of(self, line: Line, slices: u64) -> u64 {
        match self {
            SliceHash::Uniform => uniform(line, slices),
            SliceHash::SkylakeSp => skylake_sp(line),
        }
    }
}

/// What decides conflicts under an unknown hash is that it spreads lines over the slices
/// pseudo-randomly and fixes each line's slice. A full mix of the line number (MurmurHash3's
/// finaliser, scaled to the slice count by its top bits, so without its last shift, which only
/// changes the low bits) does; a plain multiplicative hash does not, as lines a fixed stride apart
/// (the same buffer of two queues) then share slices far more often than chance.
fn uniform(line: Line, slices: u64) -> u64 {
    let mut x = line.0;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    ((x as u128 * slices as u128) >> 64) as u64
}

const SKYLAKE_SP_SLICES: u32 = 18;
/// `BaseSequence_SKX_18-slice.tbl`: the slices of the 4096 lines from physical address 0.
const SKYLAKE_SP_BASE: [u8; 4096] = parse_base(include_str!("slice_hash/skylake-sp-18.tbl"), SKYLAKE_SP_SLICES as u8);
/// `PermSelectMasks_SKX_18-slice.tbl`: permutation bit i is the parity of the physical address
/// under mask i (bits 18 to 37; the masks of bits 10, 12 and 13 are zero).
const SKYLAKE_SP_MASKS: [u64; 14] = [
    0x4_c8fc_0000,
    0x1d_0538_0000,
    0x26_2b8c_0000,
    0x4_1f50_0000,
    0x2c_6d78_0000,
    0x2c_d514_0000,
    0x21_d80c_0000,
    0x3b_3f48_0000,
    0x3a_0350_0000,
    0x30_3328_0000,
    0,
    0x14_69b4_0000,
    0,
    0,
];

/// The permutation is linear over GF(2) in the address bits the masks cover (18 to 37): the XOR
/// of one column per set bit. Tabled per byte of those bits (three lookups in place of fourteen
/// parities, which the baseline x86-64 target computes without a popcount instruction).
const SKYLAKE_SP_FIRST_BIT: u32 = 18;
const SKYLAKE_SP_PERMUTATION: [[u16; 256]; 3] = permutation_tables(&SKYLAKE_SP_MASKS);

const fn permutation_tables(masks: &[u64; 14]) -> [[u16; 256]; 3] {
    let mut tables = [[0u16; 256]; 3];
    let mut chunk = 0;
    while chunk < 3 {
        let mut byte = 0;
        while byte < 256 {
            let address = (byte as u64) << (SKYLAKE_SP_FIRST_BIT + 8 * chunk as u32);
            let mut bit = 0;
            while bit < masks.len() {
                tables[chunk][byte] |= (((address & masks[bit]).count_ones() & 1) as u16) << bit;
                bit += 1;
            }
            byte += 1;
        }
        chunk += 1;
    }
    tables
}

fn skylake_sp(line: Line) -> u64 {
    let bits = (line.0 << 6) >> SKYLAKE_SP_FIRST_BIT;
    let [low, middle, high] = &SKYLAKE_SP_PERMUTATION;
    let permutation =
        low[(bits & 0xff) as usize] ^ middle[(bits >> 8 & 0xff) as usize] ^ high[(bits >> 16 & 0xff) as usize];
    SKYLAKE_SP_BASE[((line.0 ^ permutation as u64) & 0xfff) as usize] as u64
}

/// Reads a base sequence, one decimal slice number per line (`#` starts a comment to the end of
/// its line), at compile time: a table of the wrong length or with a slice out of range does not
/// build.
const fn parse_base(text: &str, slices: u8) -> [u8; 4096] {
    let bytes = text.as_bytes();
    let mut table = [0u8; 4096];
    let (mut i, mut count, mut value, mut in_number, mut in_comment) = (0, 0, 0u8, false, false);
    while i <= bytes.len() {
        let byte = if i < bytes.len() { bytes[i] } else { b'\n' };
        in_comment = (in_comment || byte == b'#') && byte != b'\n';
        let digit = !in_comment && byte.is_ascii_digit();
        if digit {
            value = value * 10 + (byte - b'0');
            in_number = true;
        } else if in_number {
            assert!(count < 4096 && value < slices, "a base sequence of 4096 slice numbers");
            table[count] = value;
            count += 1;
            value = 0;
            in_number = false;
        }
        i += 1;
    }
    assert!(count == 4096, "a base sequence of 4096 slice numbers");
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_slices_of_a_few_lines_by_hand() {
        // Computed apart from this code (a Python transcription).
        let lines = [1, 2, 3, 0x54800, (1 << 40) + 7, 0x7_0000_1234, 0xdead_beef_cafe];
        assert_eq!(lines.map(|l| SliceHash::Uniform.slice_of(Line(l), 18)), [12, 4, 0, 17, 6, 1, 10]);
        assert_eq!(SliceHash::Uniform.slice_of(Line(7), 2), 0);
    }

    #[test]
    fn uniform_spreads_lines_a_fixed_stride_apart_as_chance_would() {
        // Lines one queue's allocation apart (0x54800 lines in ddio-l2fwd) share a slice of 18
        // about 1 time in 18: a multiplicative hash put 64% of them together.
        let slice = |line| SliceHash::Uniform.slice_of(Line(line), 18);
        let stride = 0x54800;
        let same = (0..10_000u64).filter(|&k| slice(k) == slice(k + stride)).count();
        assert!((400..=720).contains(&same), "{same} of 10000 share a slice");
        let per_slice = (0..18_000u64).fold([0u32; 18], |mut n, k| {
            n[slice(k * 37) as usize] += 1;
            n
        });
        assert!(per_slice.iter().all(|&n| (850..=1150).contains(&n)), "{per_slice:?}");
    }

    #[test]
    fn skylake_sp_slices_by_hand() {
        // Below 256 KiB no mask applies: the base sequence itself (its first lines: 0 11 2 9).
        let slice = |line| SliceHash::SkylakeSp.slice_of(Line(line), 18);
        assert_eq!([0, 1, 2, 3, 4095].map(slice), [0, 11, 2, 9, 5]);
        // Physical address 1 << 18 (line 4096) has bit 18 under masks 0, 2, 5, 6 and 11:
        // permutation 0x865, so line 4096 takes the base's entry 0x865 (computed apart).
        assert_eq!(slice(4096), SKYLAKE_SP_BASE[0x865] as u64);
        assert_eq!(slice(4096 + 3), SKYLAKE_SP_BASE[0x865 ^ 3] as u64);
        // A Python transcription of the hash, on lines far apart.
        assert_eq!([0x54800, 0x7_0000_1234, 0xdead_beef].map(slice), [16, 2, 6]);
    }

    #[test]
    fn the_tabled_permutation_is_the_parities_of_the_masks() {
        let parities = |line: u64| {
            let address = line << 6;
            SKYLAKE_SP_MASKS
                .iter()
                .enumerate()
                .fold(0, |p, (bit, mask)| p | ((address & mask).count_ones() as u64 & 1) << bit)
        };
        let mut line = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            line = line.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let below_256_gib = line >> 32;
            let expected = SKYLAKE_SP_BASE[((below_256_gib ^ parities(below_256_gib)) & 0xfff) as usize] as u64;
            assert_eq!(skylake_sp(Line(below_256_gib)), expected, "line {below_256_gib:#x}");
        }
        // Each address bit from 18 to 37 alone gives its column.
        for bit in SKYLAKE_SP_FIRST_BIT..38 {
            let line = 1u64 << (bit - 6);
            assert_eq!(
                skylake_sp(Line(line)),
                SKYLAKE_SP_BASE[((line ^ parities(line)) & 0xfff) as usize] as u64,
                "bit {bit}"
            );
        }
    }

    #[test]
    fn the_skylake_sp_base_sequence_is_the_published_one() {
        // 16 slices appear 232 times in the 4096 lines, two (16 and 17) 192 times.
        let mut count = [0u32; 18];
        SKYLAKE_SP_BASE.iter().for_each(|&s| count[s as usize] += 1);
        assert_eq!(count[..16], [232; 16]);
        assert_eq!(count[16..], [192; 2]);
        assert_eq!(SKYLAKE_SP_BASE[..8], [0, 11, 2, 9, 7, 12, 5, 14]);
    }

    #[test]
    fn skylake_sp_serves_only_its_own_geometry() {
        assert_eq!(SliceHash::SkylakeSp.check(18, 64), Ok(()));
        let message = SliceHash::SkylakeSp.check(16, 64).unwrap_err();
        assert!(message.contains("18 slices of 64 B lines (got 16 slices of 64 B)"), "{message}");
        assert!(SliceHash::SkylakeSp.check(18, 128).is_err());
        assert_eq!(SliceHash::SkylakeSp.check(1, 128), Ok(()), "unsliced: never asked");
        assert_eq!(SliceHash::Uniform.check(5, 128), Ok(()));
    }
}
