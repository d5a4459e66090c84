(function(){
var zoom=1,inner=document.getElementById('lanes-inner'),panel=document.getElementById('detail');
function setZoom(z){zoom=Math.min(4,Math.max(0.4,z));inner.style.setProperty('--zoom',zoom);
document.getElementById('zoom').textContent=Math.round(zoom*100)+'%';}
document.getElementById('zin').onclick=function(){setZoom(zoom*1.25);};
document.getElementById('zout').onclick=function(){setZoom(zoom/1.25);};
document.getElementById('lanes').addEventListener('wheel',function(e){
if(e.ctrlKey){e.preventDefault();setZoom(zoom*(e.deltaY<0?1.1:1/1.1));}},{passive:false});
document.addEventListener('click',function(e){var el=e.target.closest('[data-detail]');
if(!el)return;e.stopPropagation();
document.querySelectorAll('.selected').forEach(function(s){s.classList.remove('selected');});
el.classList.add('selected');panel.textContent=el.getAttribute('data-detail');});
setZoom(1);})();
