//go:build ignore

// Regenerates gotemplate-go.json from Go's text/template: for every "t" of the
// file, Go's parse error, execution error, output and Tree.Root.String().
//
//	go run gotemplate-gen.go > new.json && mv new.json gotemplate-go.json
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"text/template"
)

// The fields of CoreDNS's templateData that matter to the engine (strings,
// []string, map[string]string, map[string]any with .Var's value types, uint16
// and uint32 header fields, a nil map) and a method with an argument, like
// templateData.Meta.
type data struct {
	Name  string
	Match []string
	Group map[string]string
	N     int
	Q     uint16
	T     uint32
	Var   map[string]any
	Nil   map[string]string
}

func (d *data) Meta(s string) string { return "m-" + s }

func main() {
	var rows []map[string]string
	b, err := os.ReadFile("gotemplate-go.json")
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		panic(err)
	}
	d := &data{Name: "a.example.", Match: []string{"a.example.", "a", "b", "c"}, Group: map[string]string{"a": "1", "0": "a.example."}, N: 5,
		Q: 28, T: 3600, Var: map[string]any{"i": 3, "f": 2.5, "g": float64(2), "s": "x", "b": true,
			"l": []string{"a", "b"}, "a": []any{1, "x"}, "n": nil}}
	out := []map[string]string{}
	for _, row := range rows {
		c := row["t"]
		r := map[string]string{"t": c}
		t, err := template.New("answer").Funcs(template.FuncMap{"parseInt": strconv.ParseUint}).Parse(c)
		if err != nil {
			r["perr"] = err.Error()
		} else {
			r["tree"] = t.Tree.Root.String()
			var buf bytes.Buffer
			if err := t.Execute(&buf, d); err != nil {
				r["eerr"] = err.Error()
			} else {
				r["out"] = buf.String()
			}
		}
		out = append(out, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
