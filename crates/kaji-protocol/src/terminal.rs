//! Making text from the model or from tools safe to print on a terminal.
//!
//! [`sanitize_terminal`] drops every C0 and C1 control character except
//! newline and tab, and every escape sequence (CSI, OSC, DCS, SOS, PM, APC
//! and the short `ESC x` forms), so nothing can move the cursor, set the
//! title, write the clipboard or change modes. Asked to, it keeps SGR
//! sequences (`ESC [ … m`, colours and text attributes).
//!
//! Pure: it never writes to a terminal itself.

/// The escape character.
const ESC: char = '\u{1b}';
/// The bell, which ends an OSC sequence.
const BEL: char = '\u{7}';
/// The C1 string terminator.
const ST: char = '\u{9c}';

/// `text` without control characters (except `\n` and `\t`) and escape
/// sequences. With `keep_sgr`, SGR sequences (`ESC [` digits, `;` or `:`,
/// then `m`) are kept.
pub fn sanitize_terminal(text: &str, keep_sgr: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            ESC => match chars.next() {
                Some('[') => csi(&mut chars, &mut out, keep_sgr, "\u{1b}["),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
                    // ESC, intermediates, then one final byte.
                    while chars
                        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                        .is_some()
                    {}
                    chars.next();
                }
                _ => {} // ESC and one final character (or end of text)
            },
            '\u{9b}' => csi(&mut chars, &mut out, keep_sgr, "\u{9b}"),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A CSI sequence after its introducer: parameters, intermediates, one
/// final byte. Kept (as `intro` and the rest) only when it is SGR and
/// `keep_sgr` is set.
fn csi(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
    keep_sgr: bool,
    intro: &str,
) {
    let mut body = String::new();
    let mut plain_params = true;
    while let Some(c) = chars.next_if(|c| ('\u{30}'..='\u{3f}').contains(c)) {
        plain_params &= c.is_ascii_digit() || c == ';' || c == ':';
        body.push(c);
    }
    let mut intermediates = false;
    while chars
        .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
        .is_some()
    {
        intermediates = true;
    }
    let last = chars.next_if(|c| ('\u{40}'..='\u{7e}').contains(c));
    if keep_sgr && plain_params && !intermediates && last == Some('m') {
        out.push_str(intro);
        out.push_str(&body);
        out.push('m');
    }
}

/// Skips a control string (OSC, DCS, SOS, PM, APC) up to and including its
/// terminator: BEL, `ESC \` or ST. An unterminated string runs to the end.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            BEL | ST => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc_title_is_removed() {
        let text = "before\u{1b}]0;PWNED\u{7}after";
        assert_eq!(sanitize_terminal(text, false), "beforeafter");
        assert_eq!(sanitize_terminal(text, true), "beforeafter");
        let st = "a\u{1b}]52;c;aGVsbG8=\u{1b}\\b";
        assert_eq!(sanitize_terminal(st, true), "ab");
        assert_eq!(sanitize_terminal("x\u{1b}]0;never ends", false), "x");
    }

    #[test]
    fn csi_is_removed_and_sgr_kept_when_asked() {
        let text = "\u{1b}[2J\u{1b}[1;31mred\u{1b}[0m\u{1b}[?1049h\u{1b}[5A";
        assert_eq!(sanitize_terminal(text, false), "red");
        assert_eq!(sanitize_terminal(text, true), "\u{1b}[1;31mred\u{1b}[0m");
        assert_eq!(sanitize_terminal("\u{9b}31mx\u{9b}2J", true), "\u{9b}31mx");
    }

    #[test]
    fn dcs_short_escapes_and_controls_are_removed() {
        let text = "a\u{1b}Pq#0;2;0;0;0\u{1b}\\b\u{1b}cc\u{1b}(Bd\r\u{7}\u{8}e\u{7f}\u{85}f";
        assert_eq!(sanitize_terminal(text, true), "abcdef");
        assert_eq!(
            sanitize_terminal("keep\ttabs\nand lines", false),
            "keep\ttabs\nand lines"
        );
        assert_eq!(sanitize_terminal("trailing\u{1b}", false), "trailing");
        assert_eq!(sanitize_terminal("ünïcödé ✓", false), "ünïcödé ✓");
    }
}
