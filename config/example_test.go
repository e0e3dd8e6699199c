package config_test

import (
	"errors"
	"fmt"

	"github.com/levee-dev/levee/config"
)

func ExampleParse() {
	file := []byte(`version: 1
signals:
  cpu:
    tagret: 0.9
admit:
  period: 50
`)
	_, err := config.Parse("levee.yaml", file, config.WithEnv([]string{"LEVEE_DEGRADE_MAX=x"}))
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// levee.yaml:4:5: signals.cpu.tagret: unknown field "tagret" (did you mean "target"?)
	// levee.yaml:6:11: admit.period: "50" needs a unit: a duration such as "50ms", "2s" or "1m"
	// env LEVEE_DEGRADE_MAX: degrade.max: must be a whole number, got "x"
}

func ExampleReloader_SetOverride() {
	rl, err := config.NewReloader(config.Default(), config.WithEnv(nil))
	if err != nil {
		panic(err)
	}
	res := rl.SetOverride("admit.dry_run", "true")
	for _, c := range res.Changes {
		fmt.Println(c)
	}
	fmt.Println("generation", res.Generation, "dry-run", rl.Current().Admit.DryRun)
	// Output:
	// admit.dry_run: false → true
	// generation 2 dry-run true
}

func ExampleDiff() {
	a := config.Default()
	b := config.Default()
	b.Signals.CPU.Target = 0.9
	b.Admin.Token = "s3cret-s3cret-s3cret"
	for _, c := range config.Diff(a, b) {
		fmt.Println(c)
	}
	// Output:
	// admin.token: "" → <redacted>
	// signals.cpu.target: 0.95 → 0.9
}
