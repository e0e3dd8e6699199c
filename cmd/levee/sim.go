package main

import "errors"

type simCmd struct{}

func (simCmd) Run() error { return errors.New("sim: not built yet") }
