package mel

import (
	"fmt"
	"regexp"
	"strings"

	"rlvr/task/world"
)

// Experience is a meta-experience M: where the wrong answer left the
// right one, what went wrong, and a rule for next time.
type Experience struct {
	Step      string // s*, the bifurcation step
	Critique  string // C
	Heuristic string // H
}

// Format is one way of writing the reflection protocol.
type Format interface {
	// Request is the instruction I with the question x, a correct answer
	// y+ and a wrong one y−: the prompt text (a user message for a chat
	// model) the policy reflects on.
	Request(question, correct, wrong string) string
	// Parse reads the meta-experience a policy wrote in reply to Request.
	// The policy wrote it, so a malformed reply is an error to count,
	// not a bug.
	Parse(reply string) (Experience, error)
	// Replay is the question asked again with m before it as working
	// memory (the prompt text, a user message for a chat model).
	Replay(question string, m Experience) string
}

// World is the built-in world's line format. The request is
//
//	R:(12+7)*3-5
//	+12+7=19|19*3=57|57-5=52|####52
//	-12+7=19|19*3=47|47-5=42|####42
//
// the reply "S:19*3=57\nC:19*3=47 is wrong\nH:check products by 7, 8 and
// 9\n", and the replay "M:S:…|C:…|H:…\nQ:(12+7)*3-5\n", as the world's
// pretraining corpus writes them. Questions are the world's prompts,
// "Q:<expression>\n".
type World struct{}

// Request implements Format.
func (World) Request(question, correct, wrong string) string {
	return world.ReflectionPrompt(world.QuestionText(question), correct, wrong)
}

// Parse implements Format.
func (World) Parse(reply string) (Experience, error) {
	r, err := world.ParseReflection(reply)
	return Experience(r), err
}

// Replay implements Format.
func (World) Replay(question string, m Experience) string {
	return world.Reflection(m).Memory() + question
}

// Chat is the paper's wording for chat models: Instruction holds
// {question}, {correct_ans} and {error_ans}; Validation holds {experience}
// and is followed by the question. Empty fields take the paper's texts
// (PaperInstruction, PaperValidation).
//
// The reply is read by the four sections the paper's output format asks
// for: s* is the text after "Failure Point:" in section 1, C is sections 1
// to 3 (failure path, success factors, reflective summary) and H is
// section 4 (subject heuristics). A <think>…</think> block before them is
// ignored.
type Chat struct {
	Instruction, Validation string
}

// PaperInstruction is MEL's meta-experience prompt I (Appendix C), with
// the wrong solution first and the correct one second, as printed.
const PaperInstruction = `You are a Meta-Cognitive Reasoning Analyst specializing in self-reflection, error root-cause analysis, and the extraction of generalizable heuristics. You are provided with multiple solution trajectories for the same problem. Note that the labels Correct or Incorrect apply to the final answer, but the reasoning process itself may contain twists and turns. Your task is to conduct a deep comparative autopsy of the thinking processes. You must identify the structural differences in cognition that led to success or failure, and synthesize these into abstract principles for future use.

Core Analysis Requirements:
1. Deep Dive into Correct Trajectories (Resilience & Robustness Analysis):
- Scenario A (Self-Correction): If you find the reasoning contains initial errors or uncertainties, look for moments of self-correction. What triggered the realization? What structural insight allowed the reasoning to pivot back to the right track?
- Scenario B (Flawless Execution): When every step of the reasoning is correct from the start, identify the Foundational "Immunity". What specific definition, clear knowledge representation, or disciplined step-by-step verification prevented this Agent from falling into the traps that the Incorrect Agent fell into?
- Goal: Extract the specific logic validation technique or robust mental representation that saved the solution.
2. Deep Dive into Incorrect Trajectories (Vulnerability Analysis):
- You must identify not only where the math/logic went wrong, but also why the reasoning drifted.
- Identify: The "Bifurcation Point" where a correct start turned into a hallucination or logic gap.
- Analyze: The latent cognitive defect (e.g., concept conflation, rigid mindset, overlooking edge cases, intuitive bias) that caused the error.
- Identify: What specific knowledge point or constraint was violated?
3. Comparative Synthesis:
- Contrast the Solutions and Decision Boundaries. Why did the successful trajectory avoid the trap that the failed one fell into?
- What structural insight did the winner have that the loser missed? (e.g., The winner treated the problem as a geometric issue, while the loser got stuck in algebra).
4. Strict Generalization Constraint:
- Forbidden: Do NOT mention the specific numbers, variables, or exact answer of the current problem in your "Heuristics" or "Reflective Summary".
- Required: Convert specific lessons into abstract heuristics (e.g., instead of "The integral of x^2 is...", use "When integrating polynomial functions..."). Formulate them as conditionally triggered rules ("If...Then...", "When dealing with [Concept X]...I should...").

Output Format (Strict Adherence Required)
1. Failure Resolution Path & Error Pattern Recognition (Mandatory for incorrect samples)
- Failure Point: Identify the exact step where logic diverged. Did it start correctly? Where did the drift happen?
- Latent Cognitive Pattern: Reveal the deep-seated reasoning defect. Was it a bias? A missing prerequisite? A misunderstanding of the prompt's intent? Do not list surface-level calculation errors.
2. Analysis of Success Factors (Mandatory for correct samples)
- Reasoning Pivot (If applicable): If the path involved self-correction, describe the moment of realization and the strategy used to fix it.
- Robustness Factor (If flawless): If the path was perfect, explain the fundamental concept or structural approach that effectively "immunized" the reasoning against common errors.
- Reason for Effectiveness: Why did this perspective work? What fundamental logic did it satisfy?
3. First-Person Reflective Summary (Mandatory)
Write a meta-cognitive reflection from the first-person perspective ("I").
- Review: Briefly review the thinking process differences.
- Insight: Discuss the specific knowledge point or cognitive habit that was critical.
- Action: Explain how you will restructure your approach to avoid the identified "Internal Reasoning Defects" in the future. Focus on the "How" of thinking, not the "What" of the answer.
4. Subject Heuristics (Internalized Experience) (Mandatory)
- [Pattern Name]: If [abstract condition] occurs, then [abstract action]...
- [Pattern Name]: When dealing with [concept type], I must strictly verify [constraint]...
(Note: These must be applicable to *future* problems of a similar class, completely stripped of this problem's specifics.)

Here the question and the corresponding solutions.
<question>
{question}
</question>
Solution 1:
<answer>
{error_ans}
</answer>
<judge>
Incorrect
</judge>
Solution 2:
<answer>
{correct_ans}
</answer>
<judge>
Correct
</judge>`

// PaperValidation is MEL's empirical-validation prompt (Appendix C): the
// meta-experience as working memory, then the question in place of
// {question} (after the prompt when it has no {question}).
const PaperValidation = `Prior study has provided some internal reference information relevant to this question, including the key approaches, steps, and reasoning needed for a correct solution; the typical reasoning biases, logical flaws, or pitfalls that appear in incorrect solutions; and various heuristic insights on how to complete this problem more effectively.

{experience}

Now, please fully internalize this information as your own experience, then independently think through the problem in detail and produce a complete answer. Note:
- You must perform full, in-depth reasoning internally and arrive at the final answer while making full use of the information above.

Answer the following question: {question}`

// Request implements Format.
func (c Chat) Request(question, correct, wrong string) string {
	in := c.Instruction
	if in == "" {
		in = PaperInstruction
	}
	return strings.NewReplacer("{question}", question, "{correct_ans}", correct, "{error_ans}", wrong).Replace(in)
}

// Replay implements Format.
func (c Chat) Replay(question string, m Experience) string {
	v := c.Validation
	if v == "" {
		v = PaperValidation
	}
	exp := "Bifurcation point: " + m.Step + "\n\nCritique:\n" + m.Critique + "\n\nHeuristics:\n" + m.Heuristic
	if !strings.Contains(v, "{question}") {
		v += "\n\n{question}"
	}
	return strings.NewReplacer("{experience}", exp, "{question}", question).Replace(v)
}

// chatHeading matches a numbered heading line of the paper's output
// format, however it is decorated ("1.", "**1.", "### 1)").
var chatHeading = regexp.MustCompile(`(?m)^[ \t>#*_]*([1-4])[.)][^\n]*`)

// sections are the output format's four sections, each known by a word
// its heading holds: a numbered list inside a section is not a heading.
var sections = [4]struct{ name, word string }{
	{"failure resolution path", "failure"}, {"success factors", "success"},
	{"reflective summary", "reflect"}, {"subject heuristics", "heuristic"},
}

// failurePoint matches the "Failure Point:" item, decorated or not.
var failurePoint = regexp.MustCompile(`(?i)failure point[*_]*\s*:[*_]*`)

// Parse implements Format.
func (Chat) Parse(reply string) (Experience, error) {
	if i := strings.LastIndex(reply, "</think>"); i >= 0 {
		reply = reply[i+len("</think>"):]
	}
	// start[n] and body[n] are where section n+1's heading and its text
	// begin: the first heading of that number and word after section n's.
	var start, body [4]int
	from := 0
	for n, sec := range sections {
		start[n] = -1
		for _, l := range chatHeading.FindAllStringSubmatchIndex(reply[from:], -1) {
			line := strings.ToLower(reply[from+l[0] : from+l[1]])
			if int(reply[from+l[2]]-'1') == n && strings.Contains(line, sec.word) {
				start[n], body[n] = from+l[0], from+l[1]
				break
			}
		}
		if start[n] < 0 {
			return Experience{}, fmt.Errorf("reflection: the reply has no section %d (%s) after section %d", n+1, sec.name, n)
		}
		from = body[n]
	}
	critique := strings.TrimSpace(reply[start[0]:start[3]])
	heuristic := strings.TrimSpace(reply[body[3]:])
	if heuristic == "" {
		return Experience{}, fmt.Errorf("reflection: section 4 (subject heuristics) is empty")
	}
	sec1 := reply[start[0]:start[1]]
	loc := failurePoint.FindStringIndex(sec1)
	if loc == nil {
		return Experience{}, fmt.Errorf("reflection: section 1 has no \"Failure Point:\" item")
	}
	step, _, _ := strings.Cut(strings.TrimSpace(sec1[loc[1]:]), "\n")
	if step = strings.TrimSpace(step); step == "" {
		return Experience{}, fmt.Errorf("reflection: the failure point is empty")
	}
	return Experience{Step: step, Critique: critique, Heuristic: heuristic}, nil
}
