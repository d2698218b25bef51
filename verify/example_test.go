package verify_test

import (
	"fmt"

	"rlvr/verify"
)

func Example() {
	response := `The total is $3 \cdot 6 = 18$ eggs, so the answer is $\boxed{18}$.`
	answer, rule := verify.Extract(response)
	fmt.Println(answer, rule)
	fmt.Println(verify.Equal(answer, "18.0"))

	r := verify.Check(`\dfrac{3}{4}`, "0.75", verify.DefaultOptions())
	fmt.Println(r.Equal, r.Pred, r.Gold, r.Method)

	reward, ok := verify.Score(response, "#### 18", verify.KindMath)
	fmt.Println(reward, ok)
	reward, ok = verify.Score("The answer is (C).", "c", verify.KindChoice)
	fmt.Println(reward, ok)
	reward, ok = verify.Score("No, penguins cannot fly.", "maybe", verify.KindYesNo)
	fmt.Println(reward, ok)
	// Output:
	// 18 boxed
	// true
	// true \frac{3}{4} 0.75 numeric
	// 1 true
	// 1 true
	// 0 false
}

func ExampleParseOptions() {
	opts, err := verify.ParseOptions("a ) 12 , b ) 15 cm , c ) 18")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(opts)
	letter, ok := verify.Choice("so the length is 15 cm", opts)
	fmt.Println(letter, ok)
	// Output:
	// [{a 12} {b 15 cm} {c 18}]
	// b true
}
