package backup

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// A LIST response is split into items with a streaming JSON tokenizer
// (go-json-experiment's jsontext, the basis of encoding/json/v2): each item
// is scanned once and kept as the API server's bytes, and an item's
// metadata is read without scanning the rest of it. encoding/json would
// scan every byte two or three times, which is most of a backup's CPU.

// page is one page of a LIST response.
type page struct {
	Continue string
	Items    [][]byte
}

// parsePage splits a LIST response body into its continue token and items.
func parsePage(body []byte) (page, error) {
	var p page
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return p, fmt.Errorf("LIST response is not a JSON object")
	}
	for dec.PeekKind() != '}' {
		key, err := dec.ReadToken()
		if err != nil {
			return p, err
		}
		switch key.String() {
		case "metadata":
			meta, err := readStrings(dec, "continue")
			if err != nil {
				return p, err
			}
			p.Continue = meta["continue"]
		case "items":
			if tok, err := dec.ReadToken(); err != nil {
				return p, err
			} else if tok.Kind() == 'n' {
				continue // "items": null
			} else if tok.Kind() != '[' {
				return p, fmt.Errorf("LIST response: items is not an array")
			}
			for dec.PeekKind() != ']' {
				v, err := dec.ReadValue()
				if err != nil {
					return p, err
				}
				p.Items = append(p.Items, bytes.Clone(v))
			}
			if _, err := dec.ReadToken(); err != nil {
				return p, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// readStrings reads the JSON object at dec's position and returns the
// string members named in keys; everything else is skipped.
func readStrings(dec *jsontext.Decoder, keys ...string) (map[string]string, error) {
	out := map[string]string{}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() == 'n' {
		return out, nil
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("want a JSON object, got %v", tok.Kind())
	}
	for dec.PeekKind() != '}' {
		k, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := k.String()
		want := false
		for _, w := range keys {
			want = want || w == name
		}
		if want && dec.PeekKind() == '"' {
			v, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			out[name] = v.String()
			continue
		}
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
	}
	_, err = dec.ReadToken()
	return out, err
}

// itemMeta is what the backup reads of each item. TypeMeta is true when
// the item carries apiVersion and kind itself (custom resources do; the
// built-in types' LIST items do not).
type itemMeta struct {
	Name, Namespace string
	TypeMeta        bool
}

// decodeMeta reads an item's metadata.name and metadata.namespace. The API
// server writes "metadata" first in LIST items, so the rest of the item is
// not scanned; other key orders work too.
func decodeMeta(raw []byte) (itemMeta, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return itemMeta{}, fmt.Errorf("not a JSON object")
	}
	typeMeta := 0
	for dec.PeekKind() != '}' {
		key, err := dec.ReadToken()
		if err != nil {
			return itemMeta{}, err
		}
		switch key.String() {
		case "apiVersion", "kind":
			typeMeta++
		case "metadata":
			m, err := readStrings(dec, "name", "namespace")
			if err != nil {
				return itemMeta{}, err
			}
			return itemMeta{Name: m["name"], Namespace: m["namespace"], TypeMeta: typeMeta == 2}, nil
		}
		if err := dec.SkipValue(); err != nil {
			return itemMeta{}, err
		}
	}
	return itemMeta{}, fmt.Errorf("no metadata")
}
