//! The data TLB's geometry as the processor describes it (CPUID): entries and ways of the
//! last-level TLB that maps 4 KiB pages for loads.

/// Entries and ways of the last level of TLB that translates data addresses in 4 KiB pages, as
/// CPUID gives them (Intel: leaf 18H, deterministic address translation parameters; AMD: leaf
/// 8000_0006H, the L2 data TLB), or `None` where the processor does not say.
pub fn data_tlb() -> Option<(u32, u32)> {
    #[cfg(target_arch = "x86_64")]
    {
        // A leaf beyond the maximum returns the highest leaf's data: the checks below rule it out.
        let cpuid = |leaf: u32, subleaf: u32| std::arch::x86_64::__cpuid_count(leaf, subleaf);
        let vendor = cpuid(0, 0);
        let (max, intel) = (vendor.eax, vendor.ebx == u32::from_le_bytes(*b"Genu"));
        if intel && max >= 0x18 {
            let leaves = (0..=cpuid(0x18, 0).eax).map(|sub| cpuid(0x18, sub));
            return intel_data_tlb(leaves.map(|r| (r.ebx, r.ecx, r.edx)));
        }
        let extended = cpuid(0x8000_0000, 0).eax;
        if vendor.ebx == u32::from_le_bytes(*b"Auth") && extended >= 0x8000_0006 {
            return amd_l2_data_tlb(cpuid(0x8000_0006, 0).ebx);
        }
    }
    None
}

/// From leaf 18H's subleaves (EBX, ECX, EDX): the highest-level data or unified TLB (EDX type 1
/// or 3, level in bits 7:5) that maps 4 KiB pages (EBX bit 0): ways (EBX 31:16) times sets (ECX).
/// A fully associative one (EDX bit 8) has as many ways as entries.
fn intel_data_tlb(leaves: impl Iterator<Item = (u32, u32, u32)>) -> Option<(u32, u32)> {
    leaves
        .filter(|&(ebx, _, edx)| matches!(edx & 0x1f, 1 | 3) && ebx & 1 == 1)
        .max_by_key(|&(_, _, edx)| (edx >> 5) & 7)
        .map(|(ebx, sets, edx)| {
            let entries = (ebx >> 16) * sets;
            (entries, if edx & (1 << 8) != 0 { entries } else { ebx >> 16 })
        })
        .filter(|&(entries, ways)| entries > 0 && ways > 0)
}

/// From leaf 8000_0006H's EBX: the L2 data TLB's 4 KiB entries (bits 27:16) and its
/// associativity code (bits 31:28, AMD's table: 0xF fully associative).
fn amd_l2_data_tlb(ebx: u32) -> Option<(u32, u32)> {
    let entries = (ebx >> 16) & 0xfff;
    let ways = match ebx >> 28 {
        code @ 1..=4 => code,
        5 => 6,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        0xf => entries,
        _ => return None,
    };
    (entries > 0 && entries.is_multiple_of(ways)).then_some((entries, ways))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intel_takes_the_highest_level_data_or_unified_tlb_for_small_pages() {
        let leaf = |ways: u32, small: u32, sets, kind: u32, level: u32, full: u32| {
            ((ways << 16) | small, sets, kind | (level << 5) | (full << 8))
        };
        let leaves = [
            leaf(8, 1, 16, 1, 1, 0),   // L1 data TLB: 128 entries
            leaf(16, 1, 128, 3, 2, 0), // L2 unified: 2048 entries, 16 ways
            leaf(4, 0, 512, 3, 3, 0),  // a level-3 one without 4 KiB pages
            leaf(8, 1, 512, 2, 3, 0),  // an instruction TLB
        ];
        assert_eq!(intel_data_tlb(leaves.into_iter()), Some((2048, 16)));
        assert_eq!(intel_data_tlb([leaf(32, 1, 1, 1, 1, 1)].into_iter()), Some((32, 32)), "fully associative");
        assert_eq!(intel_data_tlb([leaf(8, 1, 16, 0, 1, 0)].into_iter()), None, "no valid subleaf");
    }

    #[test]
    fn amd_decodes_the_l2_data_tlb_and_its_associativity_code() {
        assert_eq!(amd_l2_data_tlb((0x6 << 28) | (2048 << 16)), Some((2048, 8)));
        assert_eq!(amd_l2_data_tlb((0xf << 28) | (64 << 16)), Some((64, 64)));
        assert_eq!(amd_l2_data_tlb((0x9 << 28) | (3072 << 16)), None, "a code the table leaves out");
        assert_eq!(amd_l2_data_tlb(0x6 << 28), None, "no entries");
    }

    #[test]
    fn this_processor_describes_a_tlb_or_nothing() {
        if let Some((entries, ways)) = data_tlb() {
            assert!(entries >= ways && entries % ways == 0, "{entries} entries, {ways} ways");
        }
    }
}
