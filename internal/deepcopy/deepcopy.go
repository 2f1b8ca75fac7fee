// Package deepcopy copies a Go value, by reflection, so that the copy
// shares no memory with the original that a caller could write through.
//
// It exists for [toolrun.Runner.State]: a State is normally copied through
// its JSON, which is what a Store keeps anyway, but a history that does
// not encode (a caller's tool_use input that is not JSON, an Input holding
// a func, a channel or an infinite float) has no JSON to copy through, and
// the copy must still share nothing with the runner.
//
// What is copied, and why:
//
//   - Pointers, slices (json.RawMessage and other byte slices included),
//     maps and arrays get new memory with copied contents; a nil pointer,
//     slice or map stays nil, and an empty non-nil one stays empty and
//     non-nil.
//
//   - An interface gets a copy of its dynamic value, of the same dynamic
//     type; a nil interface stays nil.
//
//   - A struct is copied by value, then each exported field is copied
//     deeply in place. Unexported fields keep the value they had:
//     reflection may read them but not set them (short of going around the
//     type system, which this package does not do). In the types a State holds they
//     are the anthropic SDK's own plain bookkeeping — param.Opt's status,
//     a union's or param struct's metadata — which no exported field or
//     method hands out for writing, and the State's own turn in progress,
//     which Runner.State copies on its own.
//
//     The one exception is a param struct's extra fields, a map that
//     ExtraFields returns as it is: a struct with the SDK's ExtraFields
//     and SetExtraFields methods gets a copy of that map set with
//     SetExtraFields (a struct that had those methods through an embedded
//     nil pointer would panic here; the SDK embeds values). What
//     param.Override or param.SetJSON put in a struct, which its Overrides
//     method returns, is not copied, as the SDK has no method that sets it
//     on a copy: a caller who put an override in a history and writes
//     through what Overrides returns from a copy reaches the original.
//     Likewise, the exported fields of an embedded struct of an unexported
//     type are, to reflection, inside an unexported field and keep their
//     value; the SDK embeds no such field but its metadata.
//
//   - Funcs, channels and raw pointers are copied as they are: they have
//     no contents to copy.
//
//   - Map keys are copied as they are: a key is what its entry is found by.
//
// A pointer, map or slice met twice (the same type and address, and for a
// slice the same length) is copied once, and the copy points to that one
// copy too, so a cyclic value gives a cyclic copy instead of endless
// recursion, and sharing inside the value is kept inside the copy.
package deepcopy

import (
	"reflect"
	"sync"
)

// Copy returns a deep copy of v; see the package documentation for what
// is copied and what is not.
func Copy[T any](v T) T {
	src := reflect.ValueOf(&v).Elem()
	dst := reflect.New(src.Type())
	c := copier{seen: make(map[seenKey]reflect.Value)}
	c.copy(dst.Elem(), src)
	return *dst.Interface().(*T)
}

// extraFielder is the anthropic SDK's access to a param struct's extra
// fields, the one piece of its metadata a caller can write through.
type extraFielder interface {
	ExtraFields() map[string]any
	SetExtraFields(map[string]any)
}

var extraFielderType = reflect.TypeFor[extraFielder]()

// seenKey is a pointer, map or slice met already: its type, its address
// and, for a slice, its length (two slices of one array differ by it).
type seenKey struct {
	t    reflect.Type
	addr uintptr
	n    int
}

// copier holds the copies of one Copy call's pointers, maps and slices.
type copier struct {
	seen map[seenKey]reflect.Value
}

// copy sets dst, a settable zero value of src's type, to a deep copy of
// src, a value not reached through an unexported field.
func (c *copier) copy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		k := seenKey{t: src.Type(), addr: src.Pointer()}
		if p, ok := c.seen[k]; ok {
			dst.Set(p)
			return
		}
		p := reflect.New(src.Type().Elem())
		c.seen[k] = p
		c.copy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := src.Elem()
		v := reflect.New(e.Type()).Elem()
		c.copy(v, e)
		dst.Set(v)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		k := seenKey{t: src.Type(), addr: src.Pointer(), n: src.Len()}
		if s, ok := c.seen[k]; ok {
			dst.Set(s)
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		c.seen[k] = s
		if plain(src.Type().Elem()) {
			reflect.Copy(s, src)
		} else {
			for i := range src.Len() {
				c.copy(s.Index(i), src.Index(i))
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		k := seenKey{t: src.Type(), addr: src.Pointer()}
		if m, ok := c.seen[k]; ok {
			dst.Set(m)
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		c.seen[k] = m
		elem := src.Type().Elem()
		for it := src.MapRange(); it.Next(); {
			v := reflect.New(elem).Elem()
			c.copy(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Array:
		if plain(src.Type().Elem()) {
			dst.Set(src)
			return
		}
		for i := range src.Len() {
			c.copy(dst.Index(i), src.Index(i))
		}
	case reflect.Struct:
		dst.Set(src)
		info := infoOf(src.Type())
		for _, i := range info.fields {
			f := src.Field(i)
			if shallowZero(f) {
				continue // nil, as dst.Set made it
			}
			d := dst.Field(i)
			d.SetZero()
			c.copy(d, f)
		}
		if info.extra {
			x := dst.Addr().Interface().(extraFielder)
			if extra := x.ExtraFields(); extra != nil {
				m := reflect.New(reflect.TypeOf(extra)).Elem()
				c.copy(m, reflect.ValueOf(extra))
				x.SetExtraFields(m.Interface().(map[string]any))
			}
		}
	default:
		// Booleans, numbers, strings, funcs, channels, raw pointers.
		dst.Set(src)
	}
}

// plain reports whether a value of type t holds no pointer, slice, map or
// interface, so that copying it by value shares nothing.
func plain(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return plain(t.Elem())
	}
	return false
}

// structInfo is what copy needs of a struct type: the indices of its
// exported fields that may share memory, and whether its pointer has the
// SDK's extra fields.
type structInfo struct {
	fields []int
	extra  bool
}

// infos caches the structInfo of each struct type met, as encoding/json
// caches its encoders: reflecting on a type's fields every time costs more
// than the copy.
var infos sync.Map // reflect.Type → *structInfo

func infoOf(t reflect.Type) *structInfo {
	if v, ok := infos.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{extra: reflect.PointerTo(t).Implements(extraFielderType)}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !plain(f.Type) {
			info.fields = append(info.fields, i)
		}
	}
	v, _ := infos.LoadOrStore(t, info)
	return v.(*structInfo)
}

// shallowZero reports whether v is a nil pointer, slice, map or interface,
// whose copy is itself.
func shallowZero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return v.IsNil()
	}
	return false
}
