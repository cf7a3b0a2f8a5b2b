//! TeX math → Unicode. STUB: owned by the markdown/math helper; replace wholesale.

/// Rewrite `\(...\)` to `$...$` and `\[...\]` to `$$...$$` outside code spans and code blocks,
/// so pulldown-cmark (which eats those backslashes) sees math.
pub fn rewrite_delimiters(src: &str) -> String {
    src.to_string()
}

/// Inline math as one line of Unicode: `\frac{N-1}{N}` → `(N−1)/N`.
pub fn inline(tex: &str) -> String {
    tex.to_string()
}

/// Display math as one or more lines (fractions stacked).
pub fn display(tex: &str) -> Vec<String> {
    vec![tex.to_string()]
}

/// Unclosed math delimiters in a Markdown source: (1-based line, 1-based col, message).
pub fn unclosed(_src: &str) -> Vec<(usize, usize, String)> {
    Vec::new()
}
