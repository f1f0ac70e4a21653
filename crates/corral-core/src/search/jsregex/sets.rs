//! Character sets: sorted, disjoint, non-adjacent inclusive ranges of u32 (code points, or
//! UTF-16 code units without `u`/`v`; lone surrogates included).

use super::*;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Set {
    pub(super) r: Vec<(u32, u32)>,
}

impl Set {
    pub(super) fn single(c: u32) -> Set {
        Set { r: vec![(c, c)] }
    }

    pub(super) fn range(lo: u32, hi: u32) -> Set {
        Set { r: vec![(lo, hi)] }
    }

    pub(super) fn from_ranges(mut v: Vec<(u32, u32)>) -> Set {
        v.sort_unstable();
        let mut r: Vec<(u32, u32)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            if let Some(last) = r.last_mut() {
                if lo <= last.1.saturating_add(1) {
                    last.1 = last.1.max(hi);
                    continue;
                }
            }
            r.push((lo, hi));
        }
        Set { r }
    }

    pub(super) fn union(&self, o: &Set) -> Set {
        let mut v = self.r.clone();
        v.extend_from_slice(&o.r);
        Set::from_ranges(v)
    }

    pub(super) fn add(&mut self, o: &Set) {
        *self = self.union(o);
    }

    pub(super) fn complement(&self, max: u32) -> Set {
        let mut r = Vec::with_capacity(self.r.len() + 1);
        let mut next = 0u32;
        for &(lo, hi) in &self.r {
            if lo > max {
                break;
            }
            if lo > next {
                r.push((next, lo - 1));
            }
            next = hi.saturating_add(1);
        }
        if next <= max {
            r.push((next, max));
        }
        Set { r }
    }

    pub(super) fn intersect(&self, o: &Set) -> Set {
        let (mut i, mut j) = (0, 0);
        let mut r = Vec::new();
        while i < self.r.len() && j < o.r.len() {
            let (a0, a1) = self.r[i];
            let (b0, b1) = o.r[j];
            let lo = a0.max(b0);
            let hi = a1.min(b1);
            if lo <= hi {
                r.push((lo, hi));
            }
            if a1 < b1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Set { r }
    }

    pub(super) fn difference(&self, o: &Set) -> Set {
        self.intersect(&o.complement(MAX_CP))
    }

    pub(super) fn contains(&self, c: u32) -> bool {
        self.r
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    pub(super) fn intersects(&self, lo: u32, hi: u32) -> bool {
        self.r.iter().any(|&(a, b)| a <= hi && b >= lo)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.r.is_empty()
    }
}

pub(super) fn digit_set() -> Set {
    Set::range('0' as u32, '9' as u32)
}

pub(super) fn word_set() -> Set {
    Set::from_ranges(vec![(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
}

/// JavaScript's `\s`: WhiteSpace and LineTerminator.
pub(super) fn space_set() -> Set {
    Set::from_ranges(vec![
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ])
}

pub(super) fn terminator_set() -> Set {
    Set::from_ranges(vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
}
