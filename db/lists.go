package db

import (
	"encoding/json"
	"maps"
	"slices"
)

// Both stores keep a list of addresses, references or labels in one text column as a JSON
// array: EncodeList and DecodeList are that encoding's one home.

// EncodeList encodes a list as a JSON array; nil is the empty list.
func EncodeList(v []string) string {
	if v == nil {
		v = []string{}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// DecodeList decodes a JSON array of strings; anything else is the empty list.
func DecodeList(s string) []string {
	out := []string{}
	_ = json.Unmarshal([]byte(s), &out)
	return out
}

// LabelSet is the union of label lists, sorted, each once: the labels a thread row keeps.
func LabelSet(labels ...[]string) []string {
	set := map[string]bool{}
	for _, ls := range labels {
		for _, l := range ls {
			set[l] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
