package config

import (
	"path/filepath"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// functions is the function table of every expression: the go-cty standard
// library under the names Terraform users know, plus file() relative to dir.
func functions(dir string) map[string]function.Function {
	funcs := map[string]function.Function{
		"abs":             stdlib.AbsoluteFunc,
		"can":             tryfunc.CanFunc,
		"ceil":            stdlib.CeilFunc,
		"chomp":           stdlib.ChompFunc,
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"csvdecode":       stdlib.CSVDecodeFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"file":            fileFunc(dir),
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"format":          stdlib.FormatFunc,
		"formatdate":      stdlib.FormatDateFunc,
		"formatlist":      stdlib.FormatListFunc,
		"indent":          stdlib.IndentFunc,
		"join":            stdlib.JoinFunc,
		"jsondecode":      jsonDecodeFunc(),
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          stdlib.LengthFunc,
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"pow":             stdlib.PowFunc,
		"range":           stdlib.RangeFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"regex_replace":   stdlib.RegexReplaceFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"strlen":          stdlib.StrlenFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"timeadd":         stdlib.TimeAddFunc,
		"title":           stdlib.TitleFunc,
		"tobool":          stdlib.MakeToFunc(cty.Bool),
		"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":           stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":        stdlib.MakeToFunc(cty.Number),
		"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":        stdlib.MakeToFunc(cty.String),
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"try":             tryfunc.TryFunc,
		"upper":           stdlib.UpperFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,
	}
	for name, f := range funcs {
		// can and try take expressions rather than values; hcl evaluates
		// those itself, marks and all.
		if name != "can" && name != "try" {
			funcs[name] = sensitiveArgs(f)
		}
	}
	return funcs
}

// fileFunc reads a UTF-8 text file. A relative path is taken from the
// configuration directory, not the working directory, so that a config
// validates the same wherever gpulayer is started.
func fileFunc(dir string) function.Function {
	return function.New(&function.Spec{
		Description: "Reads a UTF-8 text file, relative to the configuration directory.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			b, err := readRegular(p, maxFileBytes)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "%s", err)
			}
			if !utf8.Valid(b) {
				return cty.NilVal, function.NewArgErrorf(0, "%s is not UTF-8 text", p)
			}
			return cty.StringVal(string(b)), nil
		},
	})
}

// jsonDecodeFunc is jsondecode refusing JSON nested deeper than
// maxNesting: cty's decoder recurses once per level, and a string of a
// million "[" would overflow the stack.
func jsonDecodeFunc() function.Function {
	inner := stdlib.JSONDecodeFunc
	return function.New(&function.Spec{
		Description: inner.Description(),
		Params:      inner.Params(),
		Type: func(args []cty.Value) (cty.Type, error) {
			if s := args[0]; s.IsKnown() && !s.IsNull() {
				if off := jsonNestingTooDeep([]byte(s.AsString()), false); off >= 0 {
					return cty.NilType, function.NewArgErrorf(0, "the JSON nests more than %d levels deep (at byte %d); gpulayer reads at most %d", maxNesting, off, maxNesting)
				}
			}
			return inner.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) { return inner.Call(args) },
	})
}
