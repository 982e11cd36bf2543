//! Turning a configured `cmd` string into an argv, the way a POSIX shell would split
//! it, without running a shell.
//!
//! llama-swap users write multi-line commands in YAML with `#` comment lines and
//! trailing-backslash continuations; those have to keep working. Nothing is expanded
//! (`$HOME`, `*`, `~` stay literal): macros were already expanded by the config layer,
//! and an operator who wants a shell writes `sh -c '...'` explicitly.

/// Why a command line could not be split into arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Nothing but whitespace and comments.
    #[error("empty command")]
    Empty,
    /// A quote was opened and never closed.
    #[error("unterminated {quote} quote in command")]
    UnterminatedQuote {
        /// The quote character (`'` or `"`).
        quote: char,
    },
}

/// Splits `cmd` into program and arguments with POSIX shell quoting rules and no
/// expansion.
///
/// Before tokenising, line by line: a line whose first non-blank character is `#` is
/// dropped, and a trailing backslash (ignoring trailing blanks after it) joins the
/// line with the next one. Then words are separated by unquoted blanks and newlines;
/// `'...'` is literal; `"..."` is literal except that a backslash escapes `"`, `\`,
/// `$`, `` ` `` and newline; an unquoted backslash escapes the next character; an
/// unquoted `#` at the start of a word comments out the rest of the line.
///
/// # Errors
///
/// [`CommandError::Empty`] when no word remains, [`CommandError::UnterminatedQuote`]
/// when a quote is not closed.
pub fn split_command(cmd: &str) -> Result<Vec<String>, CommandError> {
    let joined = join_lines(cmd);
    let words = tokenize(&joined)?;
    if words.is_empty() {
        return Err(CommandError::Empty);
    }
    Ok(words)
}

/// Drops comment lines and resolves trailing-backslash continuations, as llama-swap
/// does before splitting, so configs written for it split the same way here. Doing it
/// per line (rather than only in the tokenizer) also accepts blanks after the
/// backslash, which YAML editors often leave behind.
fn join_lines(cmd: &str) -> String {
    let mut out = String::with_capacity(cmd.len());
    for line in cmd.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        let end_trimmed = line.trim_end();
        // An even run of backslashes is escaped backslashes, not a continuation.
        match end_trimmed.strip_suffix('\\') {
            Some(rest) if ends_with_odd_backslashes(end_trimmed) => {
                out.push_str(rest);
                out.push(' ');
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn tokenize(input: &str) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    // `None` between words; `Some` once a word has started, even if it is empty (`''`).
    let mut word: Option<String> = None;
    let mut chars = input.chars().peekable();

    while let Some(c) = chars.next() {
        match c {
            c if is_blank(c) => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '#' if word.is_none() => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(escaped) => word.get_or_insert_with(String::new).push(escaped),
            },
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => w.push(q),
                        None => return Err(CommandError::UnterminatedQuote { quote: '\'' }),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek().copied() {
                            Some('\n') => {
                                chars.next();
                            }
                            Some(e @ ('"' | '\\' | '$' | '`')) => {
                                chars.next();
                                w.push(e);
                            }
                            _ => w.push('\\'),
                        },
                        Some(q) => w.push(q),
                        None => return Err(CommandError::UnterminatedQuote { quote: '"' }),
                    }
                }
            }
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    if let Some(w) = word {
        words.push(w);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<String> {
        split_command(s).unwrap()
    }

    #[test]
    fn plain_words_split_on_any_blank_run() {
        assert_eq!(
            split("  llama-server\t--port  5800 \n -m model.gguf "),
            ["llama-server", "--port", "5800", "-m", "model.gguf"]
        );
    }

    #[test]
    fn single_quotes_keep_everything_literal() {
        assert_eq!(
            split(r#"echo 'a  b' 'c"d' '\n' '$HOME'"#),
            ["echo", "a  b", "c\"d", "\\n", "$HOME"]
        );
    }

    #[test]
    fn double_quotes_escape_only_the_posix_set() {
        assert_eq!(
            split(r#"echo "a \"b\" \\ \$x \` \n""#),
            ["echo", "a \"b\" \\ $x ` \\n"]
        );
    }

    #[test]
    fn quoted_parts_concatenate_into_one_word() {
        assert_eq!(split(r#"--arg=a'b c'"d e"f"#), ["--arg=ab cd ef"]);
    }

    #[test]
    fn empty_quotes_make_an_empty_argument() {
        assert_eq!(split(r#"prog '' """#), ["prog", "", ""]);
    }

    #[test]
    fn unquoted_backslash_escapes_the_next_character() {
        assert_eq!(split(r"a\ b c\\d \'e"), ["a b", "c\\d", "'e"]);
    }

    #[test]
    fn nothing_is_expanded() {
        assert_eq!(
            split("echo $HOME ${PORT} ~ *.gguf $(id)"),
            ["echo", "$HOME", "${PORT}", "~", "*.gguf", "$(id)"]
        );
    }

    #[test]
    fn comment_lines_are_dropped() {
        let cmd = "llama-server\n  # --flash-attn\n  --port 5800\n#last\n";
        assert_eq!(split(cmd), ["llama-server", "--port", "5800"]);
    }

    #[test]
    fn hash_starting_a_word_comments_out_the_rest_of_the_line() {
        assert_eq!(
            split("prog -a # not this\n -b x#y '#z'"),
            ["prog", "-a", "-b", "x#y", "#z"]
        );
    }

    #[test]
    fn trailing_backslash_continues_the_line() {
        let cmd = "llama-server \\\n  --port 5800 \\   \n  -m m.gguf\\\n-v";
        assert_eq!(
            split(cmd),
            ["llama-server", "--port", "5800", "-m", "m.gguf", "-v"]
        );
    }

    #[test]
    fn escaped_backslash_at_end_of_line_is_not_a_continuation() {
        assert_eq!(split("prog a\\\\\nb"), ["prog", "a\\", "b"]);
    }

    #[test]
    fn backslash_newline_inside_double_quotes_is_removed() {
        // Reached through the tokenizer directly: join_lines would already have turned
        // the continuation into a blank.
        assert_eq!(tokenize("\"ab\\\ncd\"").unwrap(), ["abcd"]);
    }

    #[test]
    fn quotes_may_span_lines() {
        assert_eq!(
            split("sh -c 'echo a\necho b'"),
            ["sh", "-c", "echo a\necho b"]
        );
    }

    #[test]
    fn empty_and_comment_only_commands_are_refused() {
        assert_eq!(split_command(""), Err(CommandError::Empty));
        assert_eq!(split_command("  \n\t"), Err(CommandError::Empty));
        assert_eq!(
            split_command("# only\n  # comments"),
            Err(CommandError::Empty)
        );
    }

    #[test]
    fn unterminated_quotes_are_refused_with_the_quote_named() {
        assert_eq!(
            split_command("echo 'abc"),
            Err(CommandError::UnterminatedQuote { quote: '\'' })
        );
        assert_eq!(
            split_command("echo \"abc\\\""),
            Err(CommandError::UnterminatedQuote { quote: '"' })
        );
    }

    #[test]
    fn trailing_lone_backslash_is_ignored() {
        assert_eq!(split("prog a \\"), ["prog", "a"]);
    }
}
