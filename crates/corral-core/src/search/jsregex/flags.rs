//! The flags of a JavaScript regex.

use super::*;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Flags {
    pub(super) i: bool,
    pub(super) m: bool,
    pub(super) s: bool,
    pub(super) u: bool,
    pub(super) v: bool,
    pub(super) y: bool,
}

impl Flags {
    pub(super) fn parse(pattern: &str, flags: &str) -> Result<Flags> {
        let mut f = Flags::default();
        let mut seen = String::new();
        for c in flags.chars() {
            let bad = || {
                Error::new(
                    Code::InvalidPattern,
                    format!(
                        "Invalid regular expression flags '{flags}' for /{pattern}/: use each of \
                         d, g, i, m, s, u, v, y at most once, and not both u and v."
                    ),
                )
            };
            if seen.contains(c) {
                return Err(bad());
            }
            seen.push(c);
            match c {
                'i' => f.i = true,
                'm' => f.m = true,
                's' => f.s = true,
                'u' => f.u = true,
                'v' => f.v = true,
                'y' => f.y = true,
                'g' | 'd' => {}
                _ => return Err(bad()),
            }
        }
        if f.u && f.v {
            return Err(Error::new(
                Code::InvalidPattern,
                format!(
                    "Invalid regular expression flags '{flags}' for /{pattern}/: u and v cannot \
                     be used together."
                ),
            ));
        }
        Ok(f)
    }

    /// `u` or `v`: the pattern is code points, with strict syntax.
    pub(super) fn unicode(&self) -> bool {
        self.u || self.v
    }

    /// The largest character of the pattern's alphabet (code units without `u`/`v`).
    pub(super) fn max(&self) -> u32 {
        if self.unicode() {
            MAX_CP
        } else {
            MAX_UNIT
        }
    }
}
