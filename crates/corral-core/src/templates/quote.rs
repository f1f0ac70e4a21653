//! POSIX shell quoting, as Python's `shlex.quote` does it: a non-empty word of only
//! `[A-Za-z0-9@%+=:,./_-]` is left as it is; anything else goes in single quotes, each `'` written
//! `'"'"'`. The shell reads the result back as exactly the one word it was.

/// `shlex.quote(s)`.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_follows_shlex() {
        assert_eq!(quote("abc-1.2/x_y@%+=:,"), "abc-1.2/x_y@%+=:,");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\"'\"'s'");
        assert_eq!(quote("$(id)"), "'$(id)'");
    }
}
