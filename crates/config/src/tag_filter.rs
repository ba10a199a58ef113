//! Boolean expressions over node tags: `node_tag_filter` of trees and SSD priority
//! preemption, `scheduling_tag_filter` of operations and pools.
//!
//! Syntax (YTsaurus boolean formulas): tags are words of letters, digits and `_ - . / :`;
//! `!` is not, `&` (or `&&`) and, `|` (or `||`) or, with that precedence, and parentheses
//! group. An empty filter matches every node.

use std::collections::BTreeSet;
use std::fmt;

/// A parsed tag filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagFilter {
    text: String,
    expr: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Expr {
    Tag(String),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// Why a filter does not parse, with the byte offset in the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid tag filter {text:?} at offset {offset}: {message}")]
pub struct TagFilterError {
    pub text: String,
    pub offset: usize,
    pub message: String,
}

impl TagFilter {
    /// Parses `text`; an empty (or blank) text matches every node.
    pub fn parse(text: &str) -> Result<TagFilter, TagFilterError> {
        let tokens = tokenize(text)?;
        let expr = if tokens.is_empty() {
            None
        } else {
            let mut parser = Parser {
                text,
                tokens: &tokens,
                pos: 0,
            };
            let expr = parser.or()?;
            if let Some((offset, token)) = tokens.get(parser.pos) {
                return Err(error(
                    text,
                    *offset,
                    format!("unexpected {}", token.describe()),
                ));
            }
            Some(expr)
        };
        Ok(TagFilter {
            text: text.to_string(),
            expr,
        })
    }

    /// Whether a node with `tags` matches.
    pub fn matches(&self, tags: &BTreeSet<String>) -> bool {
        self.expr.as_ref().is_none_or(|e| e.eval(tags))
    }

    /// The filter as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the filter matches every node (it is empty).
    pub fn is_empty(&self) -> bool {
        self.expr.is_none()
    }
}

impl fmt::Display for TagFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Expr {
    fn eval(&self, tags: &BTreeSet<String>) -> bool {
        match self {
            Expr::Tag(t) => tags.contains(t),
            Expr::Not(e) => !e.eval(tags),
            Expr::And(a, b) => a.eval(tags) && b.eval(tags),
            Expr::Or(a, b) => a.eval(tags) || b.eval(tags),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Tag(String),
    Not,
    And,
    Or,
    Open,
    Close,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Tag(t) => format!("tag {t:?}"),
            Token::Not => "'!'".into(),
            Token::And => "'&'".into(),
            Token::Or => "'|'".into(),
            Token::Open => "'('".into(),
            Token::Close => "')'".into(),
        }
    }
}

fn error(text: &str, offset: usize, message: impl Into<String>) -> TagFilterError {
    TagFilterError {
        text: text.to_string(),
        offset,
        message: message.into(),
    }
}

fn is_tag_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':')
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, TagFilterError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let token = match c {
            '!' => Token::Not,
            '(' => Token::Open,
            ')' => Token::Close,
            '&' | '|' => {
                chars.next();
                // `&&` and `||` mean the same as `&` and `|`.
                if chars.peek().is_some_and(|&(_, d)| d == c) {
                    chars.next();
                }
                tokens.push((i, if c == '&' { Token::And } else { Token::Or }));
                continue;
            }
            c if is_tag_char(c) => {
                let mut tag = String::new();
                while let Some(&(_, d)) = chars.peek() {
                    if !is_tag_char(d) {
                        break;
                    }
                    tag.push(d);
                    chars.next();
                }
                tokens.push((i, Token::Tag(tag)));
                continue;
            }
            other => return Err(error(text, i, format!("unexpected character {other:?}"))),
        };
        chars.next();
        tokens.push((i, token));
    }
    Ok(tokens)
}

struct Parser<'a> {
    text: &'a str,
    tokens: &'a [(usize, Token)],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(_, t)| t)
    }

    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map_or(self.text.len(), |(o, _)| *o)
    }

    fn or(&mut self) -> Result<Expr, TagFilterError> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, TagFilterError> {
        let mut left = self.unary()?;
        while self.peek() == Some(&Token::And) {
            self.pos += 1;
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, TagFilterError> {
        let offset = self.offset();
        match self.peek().cloned() {
            Some(Token::Not) => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Token::Open) => {
                self.pos += 1;
                let e = self.or()?;
                if self.peek() != Some(&Token::Close) {
                    return Err(error(self.text, self.offset(), "expected ')'"));
                }
                self.pos += 1;
                Ok(e)
            }
            Some(Token::Tag(t)) => {
                self.pos += 1;
                Ok(Expr::Tag(t))
            }
            Some(other) => Err(error(
                self.text,
                offset,
                format!("expected a tag, '!' or '(', found {}", other.describe()),
            )),
            None => Err(error(self.text, offset, "expected a tag, '!' or '('")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// (filter, node tags, matches)
    const MATCHES: &[(&str, &[&str], bool)] = &[
        ("", &[], true),
        ("  ", &["x"], true),
        ("ssd", &["ssd"], true),
        ("ssd", &["hdd"], false),
        ("!ssd", &["hdd"], true),
        ("!ssd", &["ssd"], false),
        ("gpu & ssd", &["gpu"], false),
        ("gpu & ssd", &["gpu", "ssd"], true),
        ("gpu && ssd", &["gpu", "ssd"], true),
        ("gpu | ssd", &["ssd"], true),
        ("gpu || ssd", &[], false),
        // `&` binds tighter than `|`.
        ("a | b & c", &["a"], true),
        ("a | b & c", &["b"], false),
        ("(a | b) & c", &["a"], false),
        ("(a | b) & c", &["b", "c"], true),
        ("!(a | b)", &["c"], true),
        ("!!a", &["a"], true),
        ("dc-1/rack.2:x", &["dc-1/rack.2:x"], true),
    ];

    #[test]
    fn filters_match_as_boolean_formulas() {
        for &(filter, node, expected) in MATCHES {
            let f = TagFilter::parse(filter).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(f.matches(&tags(node)), expected, "{filter:?} on {node:?}");
        }
    }

    /// (filter, offset, message fragment)
    const ERRORS: &[(&str, usize, &str)] = &[
        ("a &", 3, "expected a tag"),
        ("& a", 0, "found '&'"),
        ("(a | b", 6, "expected ')'"),
        ("a b", 2, "unexpected tag \"b\""),
        ("a)", 1, "unexpected ')'"),
        ("a = b", 2, "unexpected character '='"),
        ("!", 1, "expected a tag"),
    ];

    #[test]
    fn bad_filters_name_the_offset() {
        for &(filter, offset, fragment) in ERRORS {
            let e = TagFilter::parse(filter).expect_err(filter);
            assert_eq!(e.offset, offset, "{filter:?}: {e}");
            assert!(e.to_string().contains(fragment), "{filter:?}: {e}");
        }
    }
}
