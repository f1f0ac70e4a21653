//! What grep holds while it matches: the lines that can still be shown (pruned by path as they
//! come), the counts, and — in a walk in path order — which files are done, so the search can
//! stop once the results shown are settled.

/// The files of a walk in path order that are done, by place: once more than `needed` results
/// (matches, or files with a match) come before every file still open, the first `needed` are
/// known and nothing after can change them.
pub(crate) struct Settle {
    pub(crate) needed: usize,
    /// Results are files with a match, not matches.
    pub(crate) files: bool,
    /// The first place not done yet, and the results before it.
    pub(crate) next: usize,
    pub(crate) before: usize,
    /// Places done past `next`, with their match counts.
    pub(crate) ahead: std::collections::BTreeMap<usize, usize>,
}

impl Settle {
    /// Records the file at `place` as done with `count` matches; true once the results shown are
    /// settled and at least one more is known (so the cut line says there are more).
    pub(crate) fn done(&mut self, place: usize, count: usize) -> bool {
        self.ahead.insert(place, count);
        while let Some(c) = self.ahead.remove(&self.next) {
            self.before += if self.files { usize::from(c > 0) } else { c };
            self.next += 1;
        }
        self.before > self.needed
    }
}

/// A line grep shows: a match, or context around one.
pub(crate) struct Line {
    pub(crate) n: usize,
    pub(crate) text: String,
    pub(crate) matched: bool,
}

pub(crate) struct FileHits {
    pub(crate) path: String,
    /// Matching lines (and their context), in order.
    pub(crate) lines: Vec<Line>,
    pub(crate) count: usize,
}

impl FileHits {
    /// Keeps the first `keep` matches and their context.
    pub(crate) fn truncate(&mut self, keep: usize, context: usize) {
        let mut seen = 0;
        let mut last = None;
        let mut cut = self.lines.len();
        for (i, l) in self.lines.iter().enumerate() {
            if l.matched {
                if seen == keep {
                    cut = i;
                    break;
                }
                seen += 1;
                last = Some(l.n);
            }
        }
        self.lines.truncate(cut);
        // The context before a match no longer shown goes with it.
        if let Some(last) = last {
            self.lines.retain(|l| l.matched || l.n <= last + context || l.n < last);
        }
    }

    pub(crate) fn matches(&self) -> usize {
        self.lines.iter().filter(|l| l.matched).count()
    }
}

/// The hits kept for the output: every match is counted, but only lines that can still be among
/// the first `keep` in path order are kept, so memory follows the output, not the match set.
pub(crate) struct Collected {
    pub(crate) files: Vec<FileHits>,
    pub(crate) kept: usize,
    pub(crate) total: usize,
    pub(crate) keep: usize,
    pub(crate) context: usize,
    /// For `files_with_matches` and `count`: each file with matches and how many.
    pub(crate) counts: Vec<(String, usize)>,
    pub(crate) want_counts: bool,
    /// Every file was searched: `total` is the total, not a lower bound.
    pub(crate) counted: bool,
}

impl Collected {
    pub(crate) fn new(keep: usize, context: usize, want_counts: bool) -> Self {
        Collected {
            files: Vec::new(),
            kept: 0,
            total: 0,
            keep,
            context,
            counts: Vec::new(),
            want_counts,
            counted: true,
        }
    }

    /// Adds one file's hits; after a prune that leaves `keep` matches, returns the last path
    /// holding one (the bound past which files are only counted).
    pub(crate) fn add(&mut self, h: FileHits) -> Option<String> {
        self.total += h.count;
        if self.want_counts && h.count > 0 {
            self.counts.push((h.path.clone(), h.count));
        }
        if h.lines.is_empty() {
            return None;
        }
        self.kept += h.matches();
        self.files.push(h);
        if self.kept > self.keep.max(64).saturating_mul(2) {
            self.prune();
            if self.kept >= self.keep {
                return self.files.last().map(|f| f.path.clone());
            }
        }
        None
    }

    /// Sorts by path and keeps the first `keep` matches (with their context).
    pub(crate) fn prune(&mut self) {
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut n = 0;
        let mut cut = self.files.len();
        for (i, f) in self.files.iter_mut().enumerate() {
            if n >= self.keep {
                cut = i;
                break;
            }
            f.truncate(self.keep - n, self.context);
            n += f.matches();
        }
        self.files.truncate(cut);
        self.kept = n;
    }
}
