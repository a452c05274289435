//go:build ignore

// Regenerates gotemplate-go.json from Go's text/template: for every "t" of the
// file, Go's parse error, execution error, output and Tree.Root.String().
//
//	go run gotemplate-gen.go > new.json && mv new.json gotemplate-go.json
//
// With -random N it writes N random templates instead (a fixed seed, so the
// same N gives the same file), built from what Corefile templates use:
// printf verbs, comparisons across int kinds, index, slice, len, nil, the
// escapers, if/with/range, variables and trim markers:
//
//	go run gotemplate-gen.go -random 1500 > gotemplate-random-go.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
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
	random := flag.Int("random", 0, "write this many random templates")
	seed := flag.Uint64("seed", 11, "the random generator's seed (-random)")
	flag.Parse()
	var rows []map[string]string
	if *random > 0 {
		g := gen{rand.New(rand.NewPCG(*seed, 53))}
		seen := map[string]bool{}
		for len(rows) < *random {
			t := g.template()
			if !seen[t] {
				seen[t] = true
				rows = append(rows, map[string]string{"t": t})
			}
		}
	} else {
		b, err := os.ReadFile("gotemplate-go.json")
		if err != nil {
			panic(err)
		}
		if err := json.Unmarshal(b, &rows); err != nil {
			panic(err)
		}
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

type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

var operands = []string{
	".N", ".Q", ".T", ".Name", ".Var.i", ".Var.f", ".Var.g", ".Var.s", ".Var.b", ".Var.l", ".Var.a", ".Var.n",
	".Var.zz", ".Match", ".Group", ".Group.a", ".Group.zz", ".Nil", "nil", "1", "-1", "0", "3", "28", "3600",
	"2.5", "1e3", "0x1F", "'a'", `"x"`, `"é<'>\u2028"`, `"a\tb"`, `""`, "true", "false", "$", ".",
	`(parseInt "1c" 16 16)`, "9223372036854775807", "-0", "0.0", `(index .Match 1)`, `(.Meta "k")`,
}

func (g gen) operand(depth int) string {
	if depth < 2 && g.r.IntN(4) == 0 {
		return "(" + g.command(depth+1) + ")"
	}
	return g.pick(operands...)
}

func (g gen) args(depth, min, max int) string {
	n := min + g.r.IntN(max-min+1)
	var b strings.Builder
	for range n {
		b.WriteString(" " + g.operand(depth))
	}
	return b.String()
}

var verbs = []string{"%d", "%s", "%q", "%v", "%x", "%X", "%03d", "%-5s", "%5s", "%t", "%c", "%o", "%b", "%T",
	"%5.2f", "%e", "%g", "%+d", "%#x", "%#v", "%08.3f", "%-4d|", "%.2s", "%U", "%%", "%6.1q", "%+v", "% d"}

func (g gen) format() string {
	var b strings.Builder
	for range 1 + g.r.IntN(3) {
		b.WriteString(g.pick("", "-", " ", "<", "é") + g.pick(verbs...))
	}
	return strconv.Quote(b.String())
}

func (g gen) command(depth int) string {
	switch g.r.IntN(12) {
	case 0, 1:
		return "printf " + g.format() + g.args(depth, 0, 3)
	case 2, 3:
		return g.pick("eq", "ne", "lt", "le", "gt", "ge") + g.args(depth, 1, 3)
	case 4:
		return "index " + g.pick(".Match", ".Group", ".Var", ".Var.l", ".Var.a", ".Name", ".Nil", ".N", "nil") +
			g.args(depth, 0, 2)
	case 5:
		return "slice " + g.pick(".Match", ".Name", ".Var.l", ".Var.a", ".Var.s", ".Nil", `"abc"`) + g.args(depth, 0, 3)
	case 6:
		return "len " + g.operand(depth)
	case 7:
		return g.pick("and", "or", "not") + g.args(depth, 1, 3)
	case 8:
		return g.pick("print", "println", "html", "js", "urlquery") + g.args(depth, 0, 3)
	case 9:
		return g.operand(depth) + " | " + g.pick(`printf "%v"`, "print", "len", "html", "js", `eq 1`, `index .Var`)
	default:
		return g.operand(depth)
	}
}

func (g gen) text() string {
	return g.pick("", "", " ", "  ", "\n", "\t x ", "a", " b\n ", "\n\n", " ")
}

// Delimiters with and without trim markers; rarely a marker without its blank (a parse error in Go).
func (g gen) open() string {
	if g.r.IntN(60) == 0 {
		return "{{-"
	}
	return g.pick("{{", "{{ ", "{{- ", "{{  ", "{{\n", "{{- ")
}

func (g gen) close() string {
	if g.r.IntN(60) == 0 {
		return "-}}"
	}
	return g.pick("}}", " }}", " -}}", "  }}", "\n}}", " -}}")
}

func (g gen) action() string {
	o, c := g.open(), g.close()
	switch g.r.IntN(8) {
	case 0:
		return o + "if " + g.command(0) + c + g.text() + "T" + o + "else" + c + "F" + o + "end" + c
	case 1:
		return o + "with " + g.command(0) + c + "<" + o + "." + c + ">" + o + "end" + c
	case 2:
		// Not g.command: ranging over 9223372036854775807 would not end.
		over := g.pick(".N", ".Q", ".Var", ".Var.l", ".Var.a", ".Var.n", ".Match", ".Group", ".Nil", ".Name", "3", "-1",
			"nil", ".Var.f", "(slice .Match 1)", `(index .Var "a")`, "(len .Name)")
		return o + "range " + over + c + o + "." + c + "," + o + "else" + c + "none" + o + "end" + c
	case 3:
		return o + "$x := " + g.command(0) + c + g.text() + o + "$x" + c
	default:
		return o + g.command(0) + c
	}
}

func (g gen) template() string {
	var b strings.Builder
	for range 1 + g.r.IntN(3) {
		b.WriteString(g.text() + g.action())
	}
	return b.String() + g.text()
}
