package config

import "reflect"

// clone returns a deep copy of c: every slice, map and section copied, so
// that decoding onto the copy leaves c as it was.
func clone(c *Config) *Config {
	out := reflect.New(configType)
	deepCopy(out.Elem(), reflect.ValueOf(c).Elem())
	return out.Interface().(*Config)
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	return clone(c)
}

func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		t := src.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				dst.Set(src) // a value type from elsewhere (netip.Prefix): copied whole
				return
			}
		}
		for i := range t.NumField() {
			deepCopy(dst.Field(i), src.Field(i))
		}
	case reflect.Slice:
		if src.IsNil() {
			dst.Set(reflect.Zero(src.Type()))
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			dst.Set(reflect.Zero(src.Type()))
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Pointer:
		if src.IsNil() {
			dst.Set(reflect.Zero(src.Type()))
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			dst.Set(reflect.Zero(src.Type()))
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	default:
		dst.Set(src)
	}
}
