//! The tree a pattern is parsed into, and the checks made on it (nested repetition, whether
//! backtracking is needed).

use super::*;

#[derive(Clone, Debug)]
pub(super) enum Node {
    Empty,
    /// One character from the set (already closed under case folding with `i`).
    Set(Set),
    /// `^`
    Start,
    /// `$`
    End,
    /// `\b` (true) or `\B` (false).
    WordBoundary(bool),
    Look {
        behind: bool,
        negate: bool,
        node: Box<Node>,
    },
    /// A backreference to a group that may have matched before it.
    Backref(usize),
    /// A capturing (`Some(index)`) or non-capturing group.
    Group(Box<Node>, Option<usize>),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
}

pub(super) struct Ast {
    pub(super) root: Node,
    /// Some set in the pattern contains a surrogate unit or code point.
    pub(super) can_match_surrogate: bool,
}

pub(super) fn children(n: &Node) -> &[Node] {
    match n {
        Node::Look { node, .. } | Node::Group(node, _) | Node::Repeat { node, .. } => std::slice::from_ref(node),
        Node::Concat(v) | Node::Alt(v) => v,
        _ => &[],
    }
}

/// Matches only the empty string and captures nothing.
pub(super) fn is_empty(n: &Node) -> bool {
    match n {
        Node::Empty => true,
        Node::Group(inner, None) => is_empty(inner),
        Node::Concat(v) => v.iter().all(is_empty),
        _ => false,
    }
}

pub(super) fn has_unbounded(n: &Node) -> bool {
    matches!(n, Node::Repeat { max: None, .. }) || children(n).iter().any(has_unbounded)
}

/// Err when a group repeated more than once contains an unbounded repetition.
pub(super) fn check_nested_repetition(n: &Node) -> std::result::Result<(), ()> {
    if let Node::Repeat { node, max, .. } = n {
        if max.is_none_or(|m| m > 1) && has_unbounded(node) {
            return Err(());
        }
    }
    children(n).iter().try_for_each(check_nested_repetition)
}

/// Whether the linear engine cannot express the tree. `lead`/`trail`: nothing in the pattern
/// can come before / after this node in a match, so a `^`/`$` with `m` there may consume the
/// line terminator next to it instead of looking at it.
pub(super) fn needs_backtracking(n: &Node, lead: bool, trail: bool, f: Flags) -> bool {
    match n {
        Node::Empty | Node::Set(_) => false,
        Node::Start => f.m && !lead,
        Node::End => f.m && !trail,
        // With `u` and `i`, JavaScript's word characters include U+017F and U+212A.
        Node::WordBoundary(_) => f.unicode() && f.i,
        Node::Look { .. } | Node::Backref(_) => true,
        Node::Group(node, _) => needs_backtracking(node, lead, trail, f),
        Node::Alt(v) => v.iter().any(|c| needs_backtracking(c, lead, trail, f)),
        Node::Concat(v) => {
            v.iter().enumerate().any(|(k, c)| needs_backtracking(c, lead && k == 0, trail && k + 1 == v.len(), f))
        }
        Node::Repeat { node, .. } => needs_backtracking(node, false, false, f),
    }
}
