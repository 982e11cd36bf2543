//! The set expression language: tokens and a recursive-descent parser.
//!
//! ```text
//! expr  := and ('|' and)*          -- '|' binds looser than '&'
//! and   := atom ('&' atom)*
//! atom  := NAME | '+' NAME | '(' expr ')'
//! NAME  := (letter | digit | '_' | '-' | '.')+
//! ```
//!
//! Names are not resolved here; [`super::compile`] does that. Positions in errors are
//! 1-based character columns, so a user can count to them in the YAML value.

/// Why a set expression does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyntaxError {
    /// The expression is empty or only whitespace.
    #[error("the expression is empty")]
    Empty,
    /// A character that is neither an operator nor part of a name.
    #[error(
        "unexpected character {found:?} at column {column}; names use letters, digits, '_', '-' and '.' (map other names through vars)"
    )]
    BadCharacter {
        /// The character.
        found: char,
        /// Its 1-based column.
        column: usize,
    },
    /// `+` not followed by a set name.
    #[error("'+' at column {column} must be followed by a set name")]
    EmptyReference {
        /// The 1-based column of the `+`.
        column: usize,
    },
    /// A `(` without its `)`.
    #[error("the '(' at column {column} is never closed")]
    Unclosed {
        /// The 1-based column of the `(`.
        column: usize,
    },
    /// A token where a name, `+set` or `(` was expected.
    #[error("expected a model, a var, '+set' or '(' at column {column}, found {found}")]
    ExpectedOperand {
        /// What was found (`')'`, `'&'`, `the end`).
        found: String,
        /// Its 1-based column.
        column: usize,
    },
    /// Parentheses nested deeper than anyone writes by hand; refused so that a
    /// generated expression cannot exhaust the stack.
    #[error("the '(' at column {column} is nested more than {limit} deep")]
    TooDeep {
        /// The 1-based column of the `(` past the limit.
        column: usize,
        /// The deepest nesting accepted.
        limit: usize,
    },
    /// A complete expression followed by more input (a stray `)`, or two names
    /// without an operator between them).
    #[error("unexpected {found} at column {column} after a complete expression")]
    Trailing {
        /// What was found.
        found: String,
        /// Its 1-based column.
        column: usize,
    },
}

/// A parsed, unresolved expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    /// A var or model name.
    Name(String),
    /// `+set`: the named set's expression, inlined.
    Ref(String),
    /// Every child together (union of one combination from each).
    And(Vec<Expr>),
    /// Any one child.
    Or(Vec<Expr>),
}

impl Expr {
    /// Calls `visit` on every leaf (names and references), left to right.
    pub(crate) fn leaves<'a>(&'a self, visit: &mut impl FnMut(&'a Expr)) {
        match self {
            Expr::Name(_) | Expr::Ref(_) => visit(self),
            Expr::And(children) | Expr::Or(children) => {
                for child in children {
                    child.leaves(visit);
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Name(String),
    Ref(String),
    And,
    Or,
    Open,
    Close,
    End,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Name(name) => format!("name {name:?}"),
            Token::Ref(name) => format!("reference +{name}"),
            Token::And => "'&'".to_owned(),
            Token::Or => "'|'".to_owned(),
            Token::Open => "'('".to_owned(),
            Token::Close => "')'".to_owned(),
            Token::End => "the end".to_owned(),
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Splits `input` into tokens, each with its 1-based column; the last is `End`.
fn tokenize(input: &str) -> Result<Vec<(Token, usize)>, SyntaxError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let single = match c {
            _ if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '&' => Some(Token::And),
            '|' => Some(Token::Or),
            '(' => Some(Token::Open),
            ')' => Some(Token::Close),
            _ => None,
        };
        if let Some(token) = single {
            tokens.push((token, column));
            i += 1;
            continue;
        }
        let is_ref = c == '+';
        let start = if is_ref { i + 1 } else { i };
        let mut end = start;
        while end < chars.len() && is_name_char(chars[end]) {
            end += 1;
        }
        if end == start {
            return Err(if is_ref {
                SyntaxError::EmptyReference { column }
            } else {
                SyntaxError::BadCharacter { found: c, column }
            });
        }
        let name: String = chars[start..end].iter().collect();
        tokens.push((
            if is_ref {
                Token::Ref(name)
            } else {
                Token::Name(name)
            },
            column,
        ));
        i = end;
    }
    tokens.push((Token::End, chars.len() + 1));
    Ok(tokens)
}

/// The deepest nesting of parentheses [`parse`] accepts.
const MAX_DEPTH: usize = 64;

/// Parses one set expression.
pub(crate) fn parse(input: &str) -> Result<Expr, SyntaxError> {
    if input.trim().is_empty() {
        return Err(SyntaxError::Empty);
    }
    let tokens = tokenize(input)?;
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let expr = parser.or_expr()?;
    let (token, column) = parser.peek();
    if *token != Token::End {
        return Err(SyntaxError::Trailing {
            found: token.describe(),
            column,
        });
    }
    Ok(expr)
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    /// Parentheses open around the current position.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> (&Token, usize) {
        match self.tokens.get(self.pos) {
            Some((token, column)) => (token, *column),
            None => (&Token::End, self.tokens.last().map_or(1, |(_, c)| *c)),
        }
    }

    fn bump(&mut self) -> (Token, usize) {
        let (token, column) = self.peek();
        let token = token.clone();
        if token != Token::End {
            self.pos += 1;
        }
        (token, column)
    }

    fn or_expr(&mut self) -> Result<Expr, SyntaxError> {
        let first = self.and_expr()?;
        if *self.peek().0 != Token::Or {
            return Ok(first);
        }
        let mut children = vec![first];
        while *self.peek().0 == Token::Or {
            self.bump();
            children.push(self.and_expr()?);
        }
        Ok(Expr::Or(children))
    }

    fn and_expr(&mut self) -> Result<Expr, SyntaxError> {
        let first = self.atom()?;
        if *self.peek().0 != Token::And {
            return Ok(first);
        }
        let mut children = vec![first];
        while *self.peek().0 == Token::And {
            self.bump();
            children.push(self.atom()?);
        }
        Ok(Expr::And(children))
    }

    fn atom(&mut self) -> Result<Expr, SyntaxError> {
        match self.bump() {
            (Token::Name(name), _) => Ok(Expr::Name(name)),
            (Token::Ref(name), _) => Ok(Expr::Ref(name)),
            (Token::Open, open) => {
                if self.depth == MAX_DEPTH {
                    return Err(SyntaxError::TooDeep {
                        column: open,
                        limit: MAX_DEPTH,
                    });
                }
                self.depth += 1;
                let inner = self.or_expr()?;
                self.depth -= 1;
                match self.bump() {
                    (Token::Close, _) => Ok(inner),
                    _ => Err(SyntaxError::Unclosed { column: open }),
                }
            }
            (token, column) => Err(SyntaxError::ExpectedOperand {
                found: token.describe(),
                column,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Expr {
        Expr::Name(s.to_owned())
    }

    #[test]
    fn names_may_hold_letters_digits_underscores_hyphens_and_dots() {
        assert_eq!(parse("model-name.v2_q4").unwrap(), name("model-name.v2_q4"));
        assert_eq!(parse("  modèle  ").unwrap(), name("modèle"));
    }

    #[test]
    fn operators_and_references_tokenize_with_columns() {
        let tokens = tokenize("(a | +base) & b").unwrap();
        let kinds: Vec<Token> = tokens.iter().map(|(t, _)| t.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Token::Open,
                Token::Name("a".into()),
                Token::Or,
                Token::Ref("base".into()),
                Token::Close,
                Token::And,
                Token::Name("b".into()),
                Token::End,
            ]
        );
        let columns: Vec<usize> = tokens.iter().map(|(_, c)| *c).collect();
        assert_eq!(columns, vec![1, 2, 4, 6, 11, 13, 15, 16]);
    }

    #[test]
    fn and_binds_tighter_than_or() {
        assert_eq!(
            parse("a | b & c").unwrap(),
            Expr::Or(vec![name("a"), Expr::And(vec![name("b"), name("c")])])
        );
    }

    #[test]
    fn parentheses_group() {
        assert_eq!(
            parse("(a | b) & c").unwrap(),
            Expr::And(vec![Expr::Or(vec![name("a"), name("b")]), name("c")])
        );
    }

    #[test]
    fn chains_of_one_operator_are_flat() {
        assert_eq!(
            parse("a & b & +c").unwrap(),
            Expr::And(vec![name("a"), name("b"), Expr::Ref("c".into())])
        );
    }

    #[test]
    fn empty_expression_is_rejected() {
        assert_eq!(parse("   "), Err(SyntaxError::Empty));
    }

    #[test]
    fn bare_plus_is_rejected() {
        assert_eq!(parse("+"), Err(SyntaxError::EmptyReference { column: 1 }));
        assert_eq!(
            parse("a & + b"),
            Err(SyntaxError::EmptyReference { column: 5 })
        );
    }

    #[test]
    fn characters_outside_names_are_rejected_with_their_column() {
        assert_eq!(
            parse("a @ b"),
            Err(SyntaxError::BadCharacter {
                found: '@',
                column: 3
            })
        );
        assert!(matches!(
            parse("org/model"),
            Err(SyntaxError::BadCharacter { found: '/', .. })
        ));
    }

    #[test]
    fn nesting_is_bounded_so_a_generated_expression_cannot_exhaust_the_stack() {
        let ok = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert_eq!(parse(&ok), Ok(name("a")));
        let deep = format!("{}a{}", "(".repeat(200_000), ")".repeat(200_000));
        assert_eq!(
            parse(&deep),
            Err(SyntaxError::TooDeep {
                column: MAX_DEPTH + 1,
                limit: MAX_DEPTH
            })
        );
    }

    #[test]
    fn unbalanced_parentheses_are_rejected() {
        assert_eq!(parse("(a"), Err(SyntaxError::Unclosed { column: 1 }));
        assert!(matches!(parse("a)"), Err(SyntaxError::Trailing { .. })));
        assert!(matches!(
            parse("()"),
            Err(SyntaxError::ExpectedOperand { .. })
        ));
    }

    #[test]
    fn dangling_operators_and_juxtaposed_names_are_rejected() {
        assert!(matches!(
            parse("a &"),
            Err(SyntaxError::ExpectedOperand { ref found, .. }) if found == "the end"
        ));
        assert!(matches!(
            parse("| a"),
            Err(SyntaxError::ExpectedOperand { .. })
        ));
        assert!(matches!(parse("a b"), Err(SyntaxError::Trailing { .. })));
    }
}
