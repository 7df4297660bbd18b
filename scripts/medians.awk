# medians.awk — shared by the bench-*.sh scripts: reads `go test -bench`
# output of several rounds and keeps every value of every benchmark and
# unit, for the medians the calling script's own awk program prints.
#   get(b, u)    the median of benchmark b's values in unit u (-1: none)
#   fmt(x, f)    x printed with format f, or "-" if there is none
#   ratio(a, b)  a/b as "1.23x", or "-"
function median(key,   n, i, j, t, v) {
	n = cnt[key]
	for (i = 1; i <= n; i++) v[i] = vals[key, i]
	for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	return (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
}
function get(b, u) { return ((b, u) in seen) ? median(b SUBSEP u) : -1 }
function fmt(x, f) { return x < 0 ? "-" : sprintf(f, x) }
function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2fx", a / b) : "-" }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	for (i = 3; i + 1 <= NF; i += 2) {
		u = $(i+1); k = name SUBSEP u
		cnt[k]++; vals[k, cnt[k]] = $i; seen[name, u] = 1
	}
}
