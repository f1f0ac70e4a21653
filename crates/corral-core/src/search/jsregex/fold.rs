//! Case folding: JavaScript's canonicalization, and sets closed under it.

use super::*;

/// JavaScript's Canonicalize without `u`/`v`: `toUpperCase` if it gives one unit, except that a
/// non-ASCII unit never maps to ASCII.
pub(super) fn canon_legacy(c: u32) -> u32 {
    let Some(ch) = char::from_u32(c) else { return c };
    let mut up = ch.to_uppercase();
    let (Some(first), None) = (up.next(), up.next()) else { return c };
    let u = first as u32;
    if (c >= 128 && u < 128) || u > MAX_UNIT {
        c
    } else {
        u
    }
}

/// The BMP units that share their canonical form with another unit, and those groups.
pub(super) struct LegacyFold {
    /// (unit, group index), sorted by unit.
    pub(super) units: Vec<(u32, usize)>,
    pub(super) groups: Vec<Vec<u32>>,
}

pub(super) fn legacy_fold() -> &'static LegacyFold {
    pub(super) static TABLE: OnceLock<LegacyFold> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut by_canon: HashMap<u32, Vec<u32>> = HashMap::new();
        for c in 0..=MAX_UNIT {
            if (SURR_LO..=SURR_HI).contains(&c) {
                continue;
            }
            by_canon.entry(canon_legacy(c)).or_default().push(c);
        }
        let mut groups: Vec<Vec<u32>> = by_canon.into_values().filter(|g| g.len() > 1).collect();
        groups.sort();
        let mut units = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            for &c in g {
                units.push((c, gi));
            }
        }
        units.sort_unstable();
        LegacyFold { units, groups }
    })
}

/// `s` closed under the case equivalence of the mode: every character that canonicalizes like
/// a member of `s` is added.
pub(super) fn case_closure(s: &Set, f: Flags) -> Set {
    if f.unicode() {
        use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
        let scalars = s.difference(&Set::range(SURR_LO, SURR_HI));
        let surrogates = s.intersect(&Set::range(SURR_LO, SURR_HI));
        let mut cls = ClassUnicode::new(scalars.r.iter().map(|&(lo, hi)| {
            ClassUnicodeRange::new(char::from_u32(lo).expect("scalar value"), char::from_u32(hi).expect("scalar value"))
        }));
        cls.case_fold_simple();
        let folded = Set::from_ranges(cls.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect());
        folded.union(&surrogates)
    } else {
        let table = legacy_fold();
        let mut extra = Vec::new();
        for &(c, gi) in &table.units {
            if s.contains(c) {
                extra.extend(table.groups[gi].iter().map(|&m| (m, m)));
            }
        }
        if extra.is_empty() {
            s.clone()
        } else {
            s.union(&Set::from_ranges(extra))
        }
    }
}
