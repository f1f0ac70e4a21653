//! How numbers, sizes and lines are shown to the model.

pub fn fmt_num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn format_bytes(n: u64) -> String {
    if n >= 1024 * 1024 {
        format!("{} MB", n / (1024 * 1024))
    } else if n >= 1024 {
        format!("{} KB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// Appends `line` and a newline when it fits in `max_chars` characters (counted so far in
/// `chars`); false when it does not.
pub fn push_line(out: &mut String, chars: &mut usize, line: &str, max_chars: usize) -> bool {
    let len = line.chars().count() + 1;
    if *chars + len > max_chars {
        return false;
    }
    *chars += len;
    out.push_str(line);
    out.push('\n');
    true
}

/// Appends the first `max_lines` of `lines` while they fit in `max_chars` characters (a line and
/// its newline); returns how many were shown.
pub fn push_lines<'a>(
    out: &mut String,
    lines: impl IntoIterator<Item = &'a str>,
    max_lines: usize,
    max_chars: usize,
) -> usize {
    let (mut shown, mut chars) = (0, 0);
    for line in lines.into_iter().take(max_lines) {
        if !push_line(out, &mut chars, line, max_chars) {
            break;
        }
        shown += 1;
    }
    shown
}

/// `1 line`, `2 lines`, `1,000 lines`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", fmt_num(n as u64))
    }
}

pub fn fmt_count(n: usize) -> String {
    fmt_num(n as u64)
}

/// `s` percent-encoded: every byte but ASCII letters, digits and `-_.~` as `%XX`.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
