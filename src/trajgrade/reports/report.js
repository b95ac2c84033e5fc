const runs = JSON.parse(document.getElementById('runs').textContent);
const LEFT = 130, ROW = 16;
function el(tag, cls, text){const e=document.createElement(tag);if(cls)e.className=cls;if(text!=null)e.textContent=text;return e;}
function fmt(n,d){return n==null?'—':(typeof n==='number'?n.toLocaleString(undefined,{maximumFractionDigits:d??0}):n);}
function pack(steps){const ends=[];return steps.map(s=>{let r=ends.findIndex(e=>e<=s.t0);if(r<0){r=ends.length;ends.push(0);}ends[r]=s.t0+Math.max(s.d,0.001);return r;});}
function render(run, root){
  const box=el('section','run');box.dataset.verdict=run.passed?'pass':'fail';
  const line=el('div','line');
  line.append(el('span','verdict '+(run.passed?'pass':'fail'),run.passed?'PASS':'FAIL'),el('b',null,run.label),
    el('span','muted',run.source),el('span',null,`${fmt(run.summary.llm_calls)} LLM calls · ${fmt(run.summary.tool_calls)} tool calls · ${fmt(run.summary.tokens)} tokens · cost ${run.summary.cost==null?'—':'$'+run.summary.cost.toFixed(4)} · ${fmt(run.summary.duration,1)} ms · score ${run.score.toFixed(2)}`));
  if(run.partial)line.append(el('span','verdict error','partial: '+run.notes.join('; ')));
  box.append(line);
  const table=el('table');table.append(Object.assign(el('tr'),{innerHTML:'<th>grader</th><th>type</th><th>verdict</th><th>score</th><th>explanation</th>'}));
  const evidence=new Set();run.graders.filter(g=>g.status!=='pass').forEach(g=>g.evidence.forEach(id=>evidence.add(id)));
  const bars=new Map();
  run.graders.forEach(g=>{const tr=el('tr','grader');tr.append(el('td',null,g.name),el('td','muted',g.type));
    const v=el('td');v.append(el('span','verdict '+g.status.replace(' ','-'),g.status));tr.append(v,el('td',null,g.score.toFixed(2)),el('td',null,g.explanation));
    tr.onclick=()=>{const on=!tr.classList.contains('on');table.querySelectorAll('tr.on').forEach(x=>x.classList.remove('on'));bars.forEach(b=>b.classList.remove('hl'));
      if(on){tr.classList.add('on');g.evidence.forEach(id=>{const b=bars.get(id);if(b)b.classList.add('hl');});}};
    table.append(tr);});
  box.append(table);
  const agents=[...new Set(run.steps.map(s=>s.agent))];
  const total=Math.max(run.summary.duration||0,...run.steps.map(s=>s.t0+s.d),1);
  const tl=el('div','timeline');let y=0;const width=()=>tl.clientWidth-LEFT-8;
  const placed=[];
  agents.forEach(a=>{['llm','tool'].forEach(kind=>{const steps=run.steps.filter(s=>s.agent===a&&s.kind===kind+'_call');if(!steps.length)return;
    const rows=pack(steps);const n=Math.max(...rows)+1;const lane=el('div','lane');lane.style.top=y+'px';lane.style.height=(n*ROW+6)+'px';
    lane.append(el('span',null,a+' · '+(kind==='llm'?'LLM':'tools')));tl.append(lane);
    steps.forEach((s,i)=>{const b=el('div','bar '+kind+(s.err?' err':'')+(evidence.has(s.id)?' evidence':''));b.style.top=(y+3+rows[i]*ROW)+'px';
      b.title=`${s.name} · ${fmt(s.d,1)} ms`;b.dataset.span=s.id;bars.set(s.id,b);placed.push([b,s]);
      b.onclick=()=>{detail.textContent=[`${s.kind==='llm_call'?'LLM call':'tool call'} ${s.name} (agent ${s.agent})`,`starts at ${fmt(s.t0,1)} ms, lasts ${fmt(s.d,1)} ms`+(s.err?`, failed (${s.error||'error'})`:''),
        s.model?`model ${s.model}, ${fmt(s.tokens)} tokens`:null,s.args!=null?`arguments: ${s.args}`:null,s.result!=null?`result: ${s.result}`:null].filter(Boolean).join('\n');detail.hidden=false;};
      tl.append(b);});
    y+=n*ROW+6;});});
  tl.style.height=Math.max(y,20)+'px';
  const axis=el('div','axis');[0,0.25,0.5,0.75,1].forEach(f=>{const i=el('i',null,fmt(total*f,1)+' ms');i.dataset.f=f;axis.append(i);});
  const layout=()=>{const w=width();placed.forEach(([b,s])=>{b.style.left=(LEFT+s.t0/total*w)+'px';b.style.width=Math.max(s.d/total*w,2)+'px';});
    axis.querySelectorAll('i').forEach(i=>{i.style.left=(LEFT+i.dataset.f*w-(i.dataset.f==1?50:0))+'px';});};
  const detail=el('div','detail');detail.hidden=true;
  box.append(tl,axis,detail);root.append(box);layouts.push(layout);
}
const layouts=[];const main=document.getElementById('main');
runs.filter(r=>!r.passed).concat(runs.filter(r=>r.passed)).forEach(r=>render(r,main));
const relayout=()=>layouts.forEach(f=>f());relayout();window.addEventListener('resize',relayout);
