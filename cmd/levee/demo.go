package main

import "errors"

type demoCmd struct{}

func (demoCmd) Run() error { return errors.New("demo: not built yet") }

// hijack runs a re-executed child role (backend or load generator) when the
// process was started as one, and reports whether it did.
func hijack() bool { return false }
