//! Address translation: a core's last-level TLB and its page walkers. A load, store or software
//! prefetch whose page the TLB does not hold waits for a page walker, which reads the page-table
//! lines of the walk through the core's caches, one after the other, before the access itself
//! can start. Inside a virtual machine a walk reads the guest's page-table entry and then the
//! host's (nested paging), so a walk there is two dependent reads where a bare machine's is one
//! (the upper levels stay in the paging-structure caches).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::hierarchy::Hierarchy;
use crate::memory::NODE_SPAN_BYTES;
use crate::platform::TlbSpec;
use crate::units::{Line, Time};

/// Page-table entries one 64-byte line holds (8-byte entries).
const ENTRIES_PER_LINE: u64 = 8;
/// Where a node's page tables live: in the first gigabyte of the node's address space, which the
/// allocator leaves unused, past its first megabyte (address 0 is never a line of data), one
/// table per walk read (the guest's, then the host's) of this many bytes each; the entries of
/// pages past the table's reach wrap round within it.
const TABLE_OFFSET_BYTES: u64 = 1 << 20;
const TABLE_BYTES: u64 = 511 << 20;

/// A core's TLB (set-associative, LRU within a set) and walkers.
#[derive(Debug, Clone)]
pub struct Tlb {
    /// Each set's pages, most recently used first.
    sets: Vec<Vec<u64>>,
    ways: usize,
    /// log2 of the lines in a page.
    page_line_bits: u32,
    line_bits: u32,
    walk_reads: u32,
    /// When each walker is free, earliest first out.
    walkers: BinaryHeap<Reverse<Time>>,
    pub walks: u64,
}

impl Tlb {
    /// The TLB `spec` describes for lines of `line_bytes`, or `None` when translation is not
    /// modelled.
    pub fn new(spec: &TlbSpec, line_bytes: u32) -> Option<Tlb> {
        if spec.entries == 0 {
            return None;
        }
        let page_lines = (spec.page_kib as u64 * 1024 / line_bytes as u64).max(1);
        Some(Tlb {
            sets: vec![Vec::with_capacity(spec.ways as usize); (spec.entries / spec.ways) as usize],
            ways: spec.ways as usize,
            page_line_bits: page_lines.trailing_zeros(),
            line_bits: line_bytes.trailing_zeros(),
            walk_reads: spec.walk_reads,
            walkers: (0..spec.walkers).map(|_| Reverse(Time::ZERO)).collect(),
            walks: 0,
        })
    }

    /// Translates `line` for an access `cpu` asks for at `at`: returns when the walker starts
    /// (`at` on a TLB hit) and when the translation is there.
    pub fn translate(&mut self, hierarchy: &mut Hierarchy, cpu: u32, line: Line, at: Time) -> (Time, Time) {
        let page = line.0 >> self.page_line_bits;
        let sets = self.sets.len() as u64;
        let set = &mut self.sets[(page % sets) as usize];
        if let Some(way) = set.iter().position(|&p| p == page) {
            set[..=way].rotate_right(1);
            return (at, at);
        }
        if set.len() == self.ways {
            set.pop();
        }
        set.insert(0, page);
        self.walks += 1;
        let Reverse(free) = self.walkers.pop().expect("at least one walker");
        let start = free.max(at);
        let mut done = start;
        for read in 0..self.walk_reads {
            let entry = hierarchy.core_access(cpu, self.table_line(page, read), false, done);
            done += entry.latency;
        }
        self.walkers.push(Reverse(done));
        (start, done)
    }

    /// The line holding `page`'s entry in the table walk read `read` reads, on the page's node.
    fn table_line(&self, page: u64, read: u32) -> Line {
        let node_lines_bits = (NODE_SPAN_BYTES >> self.line_bits).trailing_zeros();
        let node = (page << self.page_line_bits) >> node_lines_bits;
        let table_lines = TABLE_BYTES >> self.line_bits;
        let in_node = page & ((1 << (node_lines_bits - self.page_line_bits)) - 1);
        let table = (TABLE_OFFSET_BYTES >> self.line_bits) + read as u64 * table_lines;
        Line((node << node_lines_bits) + table + (in_node / ENTRIES_PER_LINE) % table_lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ns, tiny_platform};

    /// Two one-way sets of 4 KiB pages (pages of even and of odd numbers), walks of two reads
    /// (nested paging) by one walker, on the tiny platform (L1D hit 4 ns, DRAM 100 ns).
    fn nested() -> (Tlb, Hierarchy) {
        let spec = TlbSpec { entries: 2, ways: 1, page_kib: 4, walk_reads: 2, walkers: 1 };
        (Tlb::new(&spec, 64).unwrap(), Hierarchy::new(&tiny_platform()))
    }

    /// The first line of page `page` (64 lines a page).
    fn page(page: u64) -> Line {
        Line(page * 64)
    }

    #[test]
    fn no_entries_is_no_translation() {
        assert!(Tlb::new(&TlbSpec::default(), 64).is_none());
    }

    #[test]
    fn a_miss_walks_both_tables_one_read_after_the_other_and_a_hit_waits_for_nothing() {
        let (mut tlb, mut h) = nested();
        // Both entries' lines come from DRAM: 100 ns each, the second read after the first.
        assert_eq!(tlb.translate(&mut h, 0, page(0), ns(0.0)), (ns(0.0), ns(200.0)));
        assert_eq!(tlb.translate(&mut h, 0, Line(5), ns(10.0)), (ns(10.0), ns(10.0)), "same page");
        assert_eq!(tlb.walks, 1);
    }

    #[test]
    fn a_walk_waits_for_the_walker_and_reads_entries_the_caches_hold() {
        let (mut tlb, mut h) = nested();
        tlb.translate(&mut h, 0, page(0), ns(0.0));
        // Page 2 maps to page 0's set and replaces it; its entries share page 0's lines (eight
        // entries a line), now in the L1D (4 ns each); the walker is free at 200 ns.
        assert_eq!(tlb.translate(&mut h, 0, page(2), ns(20.0)), (ns(200.0), ns(208.0)));
        assert_eq!(tlb.translate(&mut h, 0, page(0), ns(300.0)), (ns(300.0), ns(308.0)), "page 0 was replaced");
        // Page 1 has the other set: page 0 stays.
        assert_eq!(tlb.translate(&mut h, 0, page(1), ns(400.0)), (ns(400.0), ns(408.0)));
        assert_eq!(tlb.translate(&mut h, 0, page(0), ns(500.0)), (ns(500.0), ns(500.0)));
        assert_eq!(tlb.walks, 4);
    }

    #[test]
    fn a_set_keeps_its_most_recently_used_pages() {
        let spec = TlbSpec { entries: 2, ways: 2, page_kib: 4, walk_reads: 1, walkers: 1 };
        let (mut tlb, mut h) = (Tlb::new(&spec, 64).unwrap(), Hierarchy::new(&tiny_platform()));
        for p in [0, 1, 0, 2] {
            tlb.translate(&mut h, 0, page(p), ns(1000.0 * p as f64));
        }
        // Page 1 was the least recently used when page 2 came: page 0 stays, page 1 walks again.
        assert_eq!(tlb.walks, 3);
        let at = ns(5000.0);
        assert_eq!(tlb.translate(&mut h, 0, page(0), at), (at, at));
        assert_ne!(tlb.translate(&mut h, 0, page(1), at), (at, at));
    }

    #[test]
    fn a_page_of_two_megabytes_is_one_entry() {
        let spec = TlbSpec { entries: 1, ways: 1, page_kib: 2048, walk_reads: 1, walkers: 1 };
        let (mut tlb, mut h) = (Tlb::new(&spec, 64).unwrap(), Hierarchy::new(&tiny_platform()));
        tlb.translate(&mut h, 0, Line(0), ns(0.0));
        let at = ns(1000.0);
        assert_eq!(tlb.translate(&mut h, 0, Line(32767), at), (at, at), "the page's last line");
        assert_ne!(tlb.translate(&mut h, 0, Line(32768), at), (at, at), "the next page's first");
    }

    #[test]
    fn each_walk_read_has_a_table_of_its_own_on_the_pages_node() {
        let (tlb, _) = nested();
        let node_lines = NODE_SPAN_BYTES / 64;
        let (first, table) = ((1 << 20) / 64, (511 << 20) / 64);
        assert_eq!(tlb.table_line(0, 0), Line(first));
        assert_eq!(tlb.table_line(7, 0), Line(first), "eight entries a line");
        assert_eq!(tlb.table_line(8, 0), Line(first + 1));
        assert_eq!(tlb.table_line(8, 1), Line(first + table + 1));
        // A page of node 1 (its first line at node_lines) has its entries on node 1.
        let node1_page = node_lines / 64;
        assert_eq!(tlb.table_line(node1_page + 16, 1), Line(node_lines + first + table + 2));
        // Past a table's reach, entries wrap round within it, short of the node's data (1 GiB up).
        let reach = table * 8;
        assert_eq!(tlb.table_line(reach + 8, 0), Line(first + 1));
        assert!(tlb.table_line(reach - 1, 1).0 < (1 << 30) / 64);
    }
}
