// Package chat holds the one type a conversation is made of, a message
// with its role, apart from the chat templates that render it
// (format/tokenizer): what speaks the OpenAI wire types converts to it
// without compiling a template engine.
package chat

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant", or any role the template accepts
	Content string
}
