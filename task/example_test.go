package task_test

import (
	"fmt"
	"log"
	"strings"

	"rlvr/task"
)

func ExampleStream() {
	const data = `{"question": "Tom has 3 apples and buys 2 more. How many apples does he have?", "answer": "He has 3 + 2 = <<3+2=5>>5 apples.\n#### 5"}
{"question": "A pen costs $2. How much do 4 pens cost?", "answer": "4 pens cost 4 * 2 = $<<4*2=8>>8.\n#### 8"}
`
	err := task.Stream(strings.NewReader(data), "gsm8k", func(e task.Example) error {
		fmt.Printf("%s (%s): %q\n", e.ID, e.Kind, e.Prompt)
		fmt.Printf("  solution %q, answer %q\n", e.Solution, e.Answer)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// gsm8k/0 (math): "Tom has 3 apples and buys 2 more. How many apples does he have?"
	//   solution "He has 3 + 2 = 5 apples.", answer "5"
	// gsm8k/1 (math): "A pen costs $2. How much do 4 pens cost?"
	//   solution "4 pens cost 4 * 2 = $8.", answer "8"
}

func ExampleReader_All() {
	const data = `[
  {"problem": "what is 10 % of 50 ?", "options": "a ) 2 , b ) 5 , c ) 10", "correct": "b"}
]`
	r, err := task.NewReader(strings.NewReader(data), "mathqa")
	if err != nil {
		log.Fatal(err)
	}
	for e, err := range r.All() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Prompt)
		c, _ := e.Choice()
		fmt.Printf("%s: answer %s = %s\n", e.Kind, e.Answer, c)
	}
	// Output:
	// what is 10 % of 50 ?
	// a) 2
	// b) 5
	// c) 10
	// multiple-choice: answer b = 5
}

func ExampleSplit() {
	examples := make([]task.Example, 10)
	for i := range examples {
		examples[i].ID = fmt.Sprint(i)
	}
	train, val := task.Split(examples, 0.2, 42)
	for _, e := range val {
		fmt.Print(e.ID, " ")
	}
	fmt.Println("|", len(train), "train")
	// Output: 1 9 | 8 train
}

func ExampleError() {
	const data = `{"question": "q", "answer": "42"}`
	r, _ := task.NewReader(strings.NewReader(data), "gsm8k")
	r.File = "gsm8k/test.jsonl"
	_, err := r.Read()
	fmt.Println(err)
	// Output: task: gsm8k/test.jsonl:1: field "answer": missing "####"
}
