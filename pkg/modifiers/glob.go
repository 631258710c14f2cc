package modifiers

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// compileGlob compiles a glob in the syntax of github.com/gobwas/glob,
// which Velero uses for groupResource and namespaces, into an anchored
// regular expression:
//
//	"*"      any run of characters except sep
//	"**"     any run of characters
//	"?"      one character except sep
//	"[abc]"  one of the characters; "[a-z]" a range; "[!...]" negated
//	"{a,b}"  one of the alternatives, which may hold patterns
//	"\c"     the character c itself
//
// sep 0 means there is no separator: * and ? match any character.
func compileGlob(pattern string, sep rune) (*regexp.Regexp, error) {
	any1, anyRun := ".", ".*"
	if sep != 0 {
		not := fmt.Sprintf(`[^\x{%x}]`, sep)
		any1, anyRun = not, not+"*"
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	rs := []rune(pattern)
	depth := 0
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '\\':
			i++
			if i == len(rs) {
				return nil, errors.New(`ends with an unfinished "\" escape`)
			}
			writeRune(&b, rs[i])
		case '*':
			n := 1
			for i+1 < len(rs) && rs[i+1] == '*' {
				i++
				n++
			}
			if n > 1 {
				b.WriteString(".*")
			} else {
				b.WriteString(anyRun)
			}
		case '?':
			b.WriteString(any1)
		case '[':
			j := i + 1
			neg := j < len(rs) && rs[j] == '!'
			if neg {
				j++
			}
			start := j
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j == len(rs) {
				return nil, errors.New(`has a "[" without "]"`)
			}
			class := rs[start:j]
			if len(class) == 0 {
				return nil, errors.New(`has an empty "[]"`)
			}
			b.WriteByte('[')
			if neg {
				b.WriteByte('^')
			}
			for k := 0; k < len(class); k++ {
				if k+2 < len(class) && class[k+1] == '-' {
					lo, hi := class[k], class[k+2]
					if lo > hi {
						return nil, fmt.Errorf("has an inverted range %q", string(class[k:k+3]))
					}
					writeRune(&b, lo)
					b.WriteByte('-')
					writeRune(&b, hi)
					k += 2
					continue
				}
				writeRune(&b, class[k])
			}
			b.WriteByte(']')
			i = j
		case '{':
			depth++
			b.WriteString(`(?:`)
		case ',':
			if depth > 0 {
				b.WriteByte('|')
			} else {
				writeRune(&b, r)
			}
		case '}':
			if depth > 0 {
				depth--
				b.WriteByte(')')
			} else {
				writeRune(&b, r)
			}
		default:
			writeRune(&b, r)
		}
	}
	if depth > 0 {
		return nil, errors.New(`has a "{" without "}"`)
	}
	b.WriteString(`)$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err
	}
	return re, nil
}

// writeRune writes r to a regular expression as a literal.
func writeRune(b *strings.Builder, r rune) {
	fmt.Fprintf(b, `\x{%x}`, r)
}

// lookup returns the value at a JSON pointer's reference tokens in doc
// (decoded JSON), and whether it is there.
func lookup(doc any, tokens []string) (any, bool) {
	cur := doc
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if t == "" || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != t {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// jsonEqual compares decoded JSON values (numbers as json.Number); numbers
// are equal when their values are (1 equals 1.0).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numbersEqual(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	if x, err := a.Int64(); err == nil {
		if y, err := b.Int64(); err == nil {
			return x == y
		}
	}
	x, err1 := a.Float64()
	y, err2 := b.Float64()
	return err1 == nil && err2 == nil && x == y
}
