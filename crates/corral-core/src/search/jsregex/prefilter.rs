//! The whole-file prefilter: the tree written out loosely (every line anchor, lookaround and
//! backreference widened to what it could match) as a byte regex that any file holding a matching
//! line must match. grep searches each file's bytes with it once and tests lines only in files
//! it accepts. It is sound, never exact (a proptest holds it to that): a pattern whose prefilter
//! would match the empty text gets none.

use super::*;

pub(super) fn build(ast: &Ast, f: Flags, utf16: bool) -> Option<regex::bytes::Regex> {
    let mut pem = Emitter { f, utf16, backtracking: false, prefilter: true, out: String::new() };
    pem.node(&ast.root, true, true);
    regex::bytes::RegexBuilder::new(&pem.out).nest_limit(1000).build().ok().filter(|re| !re.is_match(b""))
}

/// Whether the prefilter of this tree is the pattern itself: no anchor, word boundary,
/// lookaround or backreference (which it widens), and no class holding `\n` (which it narrows)
/// or U+FFFD (which it widens to invalid bytes).
pub(super) fn is_exact(n: &Node) -> bool {
    match n {
        Node::Start | Node::End | Node::WordBoundary(_) | Node::Look { .. } | Node::Backref(_) => false,
        Node::Set(s) => !s.contains(0x0A) && !s.contains(0xFFFD),
        _ => children(n).iter().all(is_exact),
    }
}
