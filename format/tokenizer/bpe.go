package tokenizer

import (
	"hash/maphash"
	"math"
	"sync"
)

// pairKey packs two adjacent token ids into a merges map key.
func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// smallWord is the longest pre-token, in bytes, merged with the quadratic
// in-place method; longer ones use a heap.
const smallWord = 48

// bpe appends the ids of the BPE encoding of word (raw bytes, never empty)
// to dst. Merges apply lowest rank first, leftmost first among equal ranks,
// as in the Hugging Face implementation.
func (c *core) bpe(dst []int32, word string) []int32 {
	if len(word) > smallWord {
		return c.bpeLarge(dst, word)
	}
	var symBuf [smallWord]int32
	var rankBuf [smallWord]uint64 // rank<<32 | merged id of (sym[i], sym[i+1])
	syms := c.symbols(symBuf[:0], word)
	n := len(syms)
	if n == 0 {
		return dst
	}
	ranks := rankBuf[:n]
	for i := 0; i+1 < n; i++ {
		ranks[i] = c.mergeOf(syms[i], syms[i+1])
	}
	for n > 1 {
		best := 0
		for i := 1; i+1 < n; i++ {
			if ranks[i] < ranks[best] {
				best = i
			}
		}
		if ranks[best] == math.MaxUint64 {
			break
		}
		syms[best] = int32(uint32(ranks[best]))
		copy(syms[best+1:n-1], syms[best+2:n])
		copy(ranks[best+1:n-1], ranks[best+2:n])
		n--
		if best > 0 {
			ranks[best-1] = c.mergeOf(syms[best-1], syms[best])
		}
		if best+1 < n {
			ranks[best] = c.mergeOf(syms[best], syms[best+1])
		}
	}
	return append(dst, syms[:n]...)
}

// symbols appends the initial symbols of word, at most one per byte: its
// bytes' tokens for a byte-level vocabulary, and its characters' tokens with
// byte fallback otherwise.
func (c *core) symbols(dst []int32, word string) []int32 {
	if c.charLevel {
		return c.charSymbols(dst, word)
	}
	for i := 0; i < len(word); i++ {
		if id := c.byteID[word[i]]; id >= 0 {
			dst = append(dst, id)
		}
	}
	return dst
}

// mergeOf returns rank<<32 | merged id for the pair (a, b), or MaxUint64 when
// the pair does not merge.
func (c *core) mergeOf(a, b int32) uint64 {
	if v, ok := c.merges[pairKey(a, b)]; ok {
		return v
	}
	return math.MaxUint64
}

// mergeItem is a candidate merge of the symbol at pos with its successor.
type mergeItem struct {
	merge uint64 // rank<<32 | merged id
	pos   int32
}

func (a mergeItem) less(b mergeItem) bool {
	return a.merge>>32 < b.merge>>32 || (a.merge>>32 == b.merge>>32 && a.pos < b.pos)
}

// bpeLarge is bpe for long words: a linked list of symbols and a heap of
// candidate merges, O(n log n).
func (c *core) bpeLarge(dst []int32, word string) []int32 {
	type symbol struct {
		id         int32
		prev, next int32
	}
	ids := c.symbols(make([]int32, 0, len(word)), word)
	syms := make([]symbol, len(ids))
	for i, id := range ids {
		syms[i] = symbol{id: id, prev: int32(i) - 1, next: int32(i) + 1}
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1
	var h []mergeItem
	push := func(it mergeItem) {
		h = append(h, it)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !h[i].less(h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() mergeItem {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && h[l].less(h[m]) {
				m = l
			}
			if r < len(h) && h[r].less(h[m]) {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
		return top
	}
	for i := 0; i+1 < len(syms); i++ {
		if v := c.mergeOf(syms[i].id, syms[i+1].id); v != math.MaxUint64 {
			push(mergeItem{merge: v, pos: int32(i)})
		}
	}
	const removed = -2
	for len(h) > 0 {
		it := pop()
		s := &syms[it.pos]
		if s.id == removed || s.next < 0 {
			continue
		}
		nx := &syms[s.next]
		if c.mergeOf(s.id, nx.id) != it.merge {
			continue // stale: one side has changed since this was queued
		}
		s.id = int32(uint32(it.merge))
		s.next = nx.next
		if nx.next >= 0 {
			syms[nx.next].prev = it.pos
		}
		nx.id = removed
		if s.prev >= 0 {
			if v := c.mergeOf(syms[s.prev].id, s.id); v != math.MaxUint64 {
				push(mergeItem{merge: v, pos: s.prev})
			}
		}
		if s.next >= 0 {
			if v := c.mergeOf(s.id, syms[s.next].id); v != math.MaxUint64 {
				push(mergeItem{merge: v, pos: it.pos})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	return dst
}

// wordCache maps pre-tokens to their ids. It is sharded to keep lock
// contention low and each shard is emptied when it grows past a bound, so
// memory stays bounded however much distinct text passes through.
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

const (
	cacheShards     = 32
	cacheShardLimit = 1 << 13 // entries per shard: 262,144 in all
	cacheMaxWord    = 64      // longer pre-tokens are not cached
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32
}

func newWordCache() *wordCache {
	return &wordCache{seed: maphash.MakeSeed()}
}

func (w *wordCache) shard(word string) *cacheShard {
	return &w.shards[maphash.String(w.seed, word)%cacheShards]
}

func (w *wordCache) get(sh *cacheShard, word string) ([]int32, bool) {
	sh.mu.RLock()
	ids, ok := sh.m[word]
	sh.mu.RUnlock()
	return ids, ok
}

func (w *wordCache) put(sh *cacheShard, word string, ids []int32) {
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= cacheShardLimit {
		sh.m = make(map[string][]int32, 256)
	}
	sh.m[word] = ids
	sh.mu.Unlock()
}

// encodeWord appends the ids of one pre-token.
func (c *core) encodeWord(dst []int32, word string) []int32 {
	if len(word) == 1 && !c.charLevel {
		if id := c.byteID[word[0]]; id >= 0 {
			dst = append(dst, id)
		}
		return dst
	}
	if c.ignoreMerges {
		if c.charLevel {
			if id, ok := c.vocab[word]; ok {
				return append(dst, int32(id))
			}
		} else if id, ok := c.whole[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) > cacheMaxWord {
		return c.bpe(dst, word)
	}
	sh := c.cache.shard(word)
	if ids, ok := c.cache.get(sh, word); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = c.bpe(dst, word)
	c.cache.put(sh, word, append([]int32(nil), dst[n:]...))
	return dst
}
