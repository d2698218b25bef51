package vec

func softmaxCausalGo(p []float32, T, L, past, window int) {
	for i := 0; i < T; i++ {
		row := p[i*L : (i+1)*L]
		valid, start := past+i+1, windowStart(past+i, window)
		m := row[start]
		for _, v := range row[start+1 : valid] {
			m = max(m, v)
		}
		var sum float32
		for j := start; j < valid; j++ {
			e := Exp32(row[j] - m)
			row[j] = e
			sum += e
		}
		inv := 1 / sum
		for j := start; j < valid; j++ {
			row[j] *= inv
		}
		clear(row[:start])
		clear(row[valid:])
	}
}

func sigmoid(x float32) float32 { return 1 / (1 + Exp32(-x)) }

func swigluGo(out, sig, gu []float32, N, F int) {
	for n := 0; n < N; n++ {
		g, u := gu[n*2*F:n*2*F+F], gu[n*2*F+F:(n+1)*2*F]
		y, sg := out[n*F:(n+1)*F], sig[n*F:(n+1)*F]
		for i := range y {
			sg[i] = sigmoid(g[i])
			y[i] = g[i] * sg[i] * u[i]
		}
	}
}

func swigluBackwardGo(dgu, dout, gu, sig []float32, N, F int) {
	for n := 0; n < N; n++ {
		g, u := gu[n*2*F:n*2*F+F], gu[n*2*F+F:(n+1)*2*F]
		dg, du := dgu[n*2*F:n*2*F+F], dgu[n*2*F+F:(n+1)*2*F]
		dy, sg := dout[n*F:(n+1)*F], sig[n*F:(n+1)*F]
		for i := range dy {
			du[i] += dy[i] * g[i] * sg[i]
			dg[i] += dy[i] * u[i] * sg[i] * (1 + g[i]*(1-sg[i]))
		}
	}
}

func gegluGo(out, sig, gu []float32, N, F int) {
	for n := 0; n < N; n++ {
		g, u := gu[n*2*F:n*2*F+F], gu[n*2*F+F:(n+1)*2*F]
		y, sg := out[n*F:(n+1)*F], sig[n*F:(n+1)*F]
		for i, x := range g {
			sg[i] = sigmoid(geluTwoBeta * (x + geluKappa*(x*x*x)))
			y[i] = x * sg[i] * u[i]
		}
	}
}

func gegluBackwardGo(dgu, dout, gu, sig []float32, N, F int) {
	for n := 0; n < N; n++ {
		g, u := gu[n*2*F:n*2*F+F], gu[n*2*F+F:(n+1)*2*F]
		dg, du := dgu[n*2*F:n*2*F+F], dgu[n*2*F+F:(n+1)*2*F]
		dy, sg := dout[n*F:(n+1)*F], sig[n*F:(n+1)*F]
		for i, x := range g {
			s := sg[i]
			du[i] += dy[i] * x * s
			dg[i] += dy[i] * u[i] * (s + x*s*(1-s)*geluTwoBeta*(1+3*geluKappa*x*x))
		}
	}
}

func expShiftSumGo(dst, src []float32, shift float32) float64 {
	var sum float64
	for i, v := range src {
		e := Exp32(v - shift)
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

func decodeAttentionGo(out []float32, outStride int, q []float32, qStride int, k, v []float32, capacity int, slot, n []int32, H, KV, hd int, scale float32, window int, scratch []float32) {
	rep, kvw := H/KV, KV*hd
	for s := range slot {
		// Only keys [start, n) are seen: the cache from start on, L long.
		start := windowStart(int(n[s])-1, window)
		L := int(n[s]) - start
		kb, vb := k[int(slot[s])*kvw*capacity+start:], v[int(slot[s])*kvw*capacity+start*hd:]
		p := scratch[:L]
		for h := 0; h < H; h++ {
			g := h / rep
			qh := q[s*qStride+h*hd:][:hd]
			clear(p)
			for i, x := range qh {
				row := kb[(g*hd+i)*capacity:][:L]
				for j, kv := range row {
					p[j] += x * kv
				}
			}
			for j := range p {
				p[j] *= scale
			}
			softmaxCausalGo(p, 1, L, L-1, 0)
			o := out[s*outStride+h*hd:][:hd]
			clear(o)
			for j := 0; j < L; j++ {
				vj := vb[(g*capacity+j)*hd:][:hd]
				for i := range o {
					o[i] += p[j] * vj[i]
				}
			}
		}
	}
}

func maxGo(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}

// sum64 sums a block of 64 in float64 along eight independent chains.
func sum64(p []float32) float64 {
	var a [8]float64
	for j := 0; j < 64; j += 8 {
		q := p[j : j+8 : j+8]
		a[0] += float64(q[0])
		a[1] += float64(q[1])
		a[2] += float64(q[2])
		a[3] += float64(q[3])
		a[4] += float64(q[4])
		a[5] += float64(q[5])
		a[6] += float64(q[6])
		a[7] += float64(q[7])
	}
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}
