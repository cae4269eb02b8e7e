/**
 * A small Prometheus text registry: counters and gauges with labels. The hot path only
 * increments a number in a Map; formatting happens when /metrics is scraped.
 */
type Labels = Record<string, string | number>

interface Family {
  help: string
  type: 'counter' | 'gauge'
  series: Map<string, { labels: Labels; value: number }>
  collect?: () => Array<{ labels: Labels; value: number }>
}

export class Metrics {
  private readonly families = new Map<string, Family>()

  counter(name: string, help: string): (labels?: Labels, by?: number) => void {
    const family = this.family(name, help, 'counter')
    return (labels = {}, by = 1) => {
      const key = labelKey(labels)
      const series = family.series.get(key)
      if (series) series.value += by
      else family.series.set(key, { labels, value: by })
    }
  }

  /** Values read at scrape time from state kept elsewhere (a cache's own hit counter, a queue's length). */
  collect(name: string, help: string, type: Family['type'], collect: () => number | Array<{ labels: Labels; value: number }>): void {
    const family = this.family(name, help, type)
    family.collect = () => {
      const value = collect()
      return typeof value === 'number' ? [{ labels: {}, value }] : value
    }
  }

  render(): string {
    const lines: string[] = []
    for (const [name, family] of this.families) {
      lines.push(`# HELP ${name} ${family.help}`, `# TYPE ${name} ${family.type}`)
      const series = family.collect ? family.collect() : [...family.series.values()]
      for (const { labels, value } of series) lines.push(`${name}${formatLabels(labels)} ${value}`)
    }
    return lines.join('\n') + '\n'
  }

  private family(name: string, help: string, type: Family['type']): Family {
    let family = this.families.get(name)
    if (!family) {
      family = { help, type, series: new Map() }
      this.families.set(name, family)
    }
    return family
  }
}

function labelKey(labels: Labels): string {
  let key = ''
  for (const name in labels) key += name + '=' + labels[name] + ','
  return key
}

function formatLabels(labels: Labels): string {
  const parts = Object.entries(labels).map(([name, value]) => `${name}="${String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
  return parts.length ? `{${parts.join(',')}}` : ''
}
