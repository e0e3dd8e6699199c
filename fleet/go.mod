module github.com/levee-dev/levee/fleet

go 1.26.0

replace github.com/levee-dev/levee => ../

require github.com/levee-dev/levee v0.0.0-00010101000000-000000000000 // indirect
